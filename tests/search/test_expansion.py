"""Query expansion into the catalogue's own words by the embedding model (``lexical-expanded``, ``hybrid``)."""

from toolhub.search import SearchDocument, get_provider
from toolhub.search.expansion import VocabularyExpander
from toolhub.search.lexical import LexicalProvider, document_fields
from toolhub.search.text import analyze

AIR = SearchDocument("get_air_quality", "Return the air pollution index of a city.", "travel")
DOCUMENTS = [
    AIR,
    SearchDocument("restart_service", "Restart a running service or container.", "devops"),
    SearchDocument("resize_image", "Scale an image to new dimensions.", "files", ("images",)),
    SearchDocument("query_express_delivery", "根据快递单号查询包裹的物流轨迹。", "物流"),
]


def test_a_word_the_catalogue_lacks_finds_the_tool_through_its_nearest_catalogue_words() -> None:
    query = "is the smog bad in Delhi"
    # (plain lexical search finds it through WordNet's hypernyms, which the expanded provider leaves out)
    assert LexicalProvider(thesaurus=False).build(DOCUMENTS).search(query, k=3) == []
    assert get_provider("lexical-expanded").build(DOCUMENTS).search(query, k=3)[0] == "get_air_quality"


def test_expansion_adds_only_catalogue_terms_and_weighs_them_below_typed_ones() -> None:
    weights = VocabularyExpander(DOCUMENTS).expand("smog", {"smog": 1.0})
    added = {term: weight for term, weight in weights.items() if term != "smog"}
    assert weights["smog"] == 1.0
    assert "air" in added and "pollut" in added
    assert all(0.0 < weight < 1.0 for weight in added.values())
    catalogue_terms = {
        term for document in DOCUMENTS for text in document_fields(document).values() for term in analyze(text)
    }
    assert set(added) <= catalogue_terms


def test_cjk_text_and_numbers_are_not_expanded() -> None:
    expander = VocabularyExpander(DOCUMENTS)
    assert expander.expand("快递 42", {"快": 1.0}) == {"快": 1.0}
    assert get_provider("lexical-expanded").build(DOCUMENTS).search("我的快递到哪了", k=3) == ["query_express_delivery"]


def test_a_tool_left_out_of_the_index_lends_no_words_to_the_expansion() -> None:
    # given an index built without the air-quality tool (a principal not granted it)
    granted = [document for document in DOCUMENTS if document is not AIR]
    weights = VocabularyExpander(granted).expand("smog", {"smog": 1.0})
    # then none of its words are added, and it is never a hit
    assert not {"air", "pollut"} & set(weights)
    index = get_provider("lexical-expanded").build(granted)
    assert "get_air_quality" not in index.search("is the smog bad in Delhi", k=5)


def test_bad_inputs_give_empty_results_rather_than_errors() -> None:
    index = get_provider("lexical-expanded").build(DOCUMENTS)
    assert index.search("", k=5) == []
    assert index.search("smog", k=0) == []
    assert get_provider("lexical-expanded").build([]).search("smog", k=5) == []
    assert set(index.search("smog", k=5, category="devops")) <= {"restart_service"}
