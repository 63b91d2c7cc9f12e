"""The shipped WordNet table, its builder (on a small WordNet of its own) and its use by lexical search."""

from pathlib import Path

from toolhub.search import SearchDocument, get_provider
from toolhub.search.lexical import LexicalProvider
from toolhub.search.text import expand
from toolhub.search.thesaurus import MAX_SENSES, SCORES, TABLE_PATH, THESAURUS, build_table, thesaurus_terms

# Five synsets in WordNet's database format: smog (a kind of air pollution), air pollution (a kind of
# pollution), a second, rarer sense of "smog" ranked below MAX_SENSES, and the verb summarize with its
# derived noun summary (a lexical pointer from word 1 to word 1).
_NOUNS = """\
  1 a licence header line, skipped
00000001 03 n 02 smog 0 smogginess 0 001 @ 00000002 n 0000 | air pollution by smoke
00000002 03 n 01 air_pollution 0 001 @ 00000003 n 0000 | pollution of the atmosphere
00000003 03 n 01 pollution 0 000 | undesirable state of the environment
00000004 03 n 02 smog 0 haze 0 000 | a rarer sense
00000005 03 n 01 summary 0 001 + 00000006 v 0101 | a brief statement
"""
_VERBS = "00000006 31 v 01 summarize 0 001 + 00000005 n 0101 00 | give a summary\n"
# The rarer sense of "smog" ranks MAX_SENSES (0 the most frequent); the ranks between are other synsets'.
_SMOG_SENSES = ["00000001", *["00000003"] * (MAX_SENSES - 1), "00000004"]
_INDEX = {
    "noun": [
        "air_pollution n 1 1 @ 1 0 00000002",
        "pollution n 1 0 1 0 00000003",
        f"smog n {len(_SMOG_SENSES)} 1 @ {len(_SMOG_SENSES)} 0 {' '.join(_SMOG_SENSES)}",
        "smogginess n 1 1 @ 1 0 00000001",
        "summary n 1 1 + 1 0 00000005",
    ],
    "verb": ["summarize v 1 1 + 1 0 00000006"],
}


def _small_wordnet(folder: Path) -> Path:
    (folder / "data.noun").write_text(_NOUNS, encoding="utf-8")
    (folder / "data.verb").write_text(_VERBS, encoding="utf-8")
    for part in ("adj", "adv"):
        (folder / f"data.{part}").write_text("", encoding="utf-8")
        (folder / f"index.{part}").write_text("", encoding="utf-8")
    for part in ("noun", "verb"):
        (folder / f"index.{part}").write_text("\n".join(_INDEX[part]) + "\n", encoding="utf-8")
    return folder


def test_the_builder_relates_synonyms_hypernyms_and_derived_words_by_stem(tmp_path: Path) -> None:
    table = build_table(_small_wordnet(tmp_path))
    # a synonym, and a hypernym's words (a multi-word lemma gives each of its words), folded onto stems
    assert table["smog"] == {"smoggi": SCORES["synonym"], "air": SCORES["hypernym"], "pollut": SCORES["hypernym"]}
    # derivation links a verb and its noun both ways
    assert table["summari"]["summar"] == table["summar"]["summari"] == SCORES["derived"]
    # a lemma is never related to itself, and a sense ranked MAX_SENSES or lower adds nothing ("haze")
    assert "haze" not in table["smog"] and all(head not in row for head, row in table.items())


def test_the_shipped_table_relates_general_words() -> None:
    assert TABLE_PATH.name == "thesaurus_terms.txt.gz" and (TABLE_PATH.parent / "WORDNET_LICENSE").is_file()
    assert len(THESAURUS.rows) > 40_000
    related = dict(thesaurus_terms("smog"))
    assert related["air"] == related["pollut"] == SCORES["hypernym"]
    assert list(thesaurus_terms("no-such-term")) == []


def test_thesaurus_terms_weigh_well_below_typed_and_related_ones() -> None:
    with_thesaurus = expand(("smog",))
    without = expand(("smog",), thesaurus=False)
    added = {term: weight for term, weight in with_thesaurus.items() if term not in without}
    assert with_thesaurus["smog"] == 1.0 and added and all(0.0 < weight <= 0.2 for weight in added.values())


def test_lexical_search_reaches_a_tool_through_the_thesaurus_and_can_leave_it_out() -> None:
    documents = [
        SearchDocument("get_air_quality", "Return the air quality index and pollutant levels for a city.", "weather"),
        SearchDocument("send_email", "Send an email message to recipients.", "messaging", ("email",)),
    ]
    assert get_provider("lexical").build(documents).search("smog in Delhi", k=1) == ["get_air_quality"]
    # "smog" has no neighbour in the embedding table: without WordNet nothing in the catalogue answers it
    assert LexicalProvider(thesaurus=False).build(documents).search("smog in Delhi", k=1) == []
