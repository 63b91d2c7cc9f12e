"""The shipped word-association table and its use by the lexical provider (no model needed)."""

import sys

import pytest

from toolhub.search import SearchDocument, get_provider
from toolhub.search import embedding as embedding_module
from toolhub.search.related import MIN_SIMILARITY, RELATED, related_terms
from toolhub.search.text import expand

WEATHER = SearchDocument("get_weather_forecast", "Return the weather forecast for a city for the next days.", "travel")
DOCUMENTS = [
    WEATHER,
    SearchDocument("send_email", "Send an email message to recipients.", "messaging", ("email",)),
    SearchDocument("resize_image", "Scale an image to new dimensions.", "files"),
]


def test_the_table_relates_general_words_by_stem() -> None:
    related = dict(related_terms("rain"))
    assert "weather" in related and 0.45 <= related["weather"] <= 1.0
    assert list(related.values()) == sorted(related.values(), reverse=True)
    assert list(related_terms("no-such-term")) == []


def test_every_link_is_a_similarity_above_the_cut_and_never_a_term_to_itself() -> None:
    table = RELATED.rows
    assert len(table) > 10_000
    for head in table:
        row = related_terms(head)
        assert row and head not in {term for term, _ in row}
        assert all(MIN_SIMILARITY - 0.005 <= score <= 1.0 for _, score in row), head


def test_related_terms_weigh_below_typed_ones() -> None:
    weights = expand(("rain", "weather"))
    assert weights["rain"] == weights["weather"] == 1.0
    added = {term: weight for term, weight in weights.items() if term not in ("rain", "weather")}
    assert added and all(0.0 < weight <= 0.5 for weight in added.values())


def test_lexical_search_uses_the_table_without_the_embedding_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    # given the embedding extra unavailable (an import of onnxruntime fails)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    embedding_module.encoder.cache_clear()
    try:
        index = get_provider("lexical").build(DOCUMENTS)
        # then a query that shares no word with the tool still finds it through related words
        assert index.search("will it rain in Oslo", k=1) == ["get_weather_forecast"]
        # and a tool left out of the index is never a hit, whatever its words are related to
        assert get_provider("lexical").build(DOCUMENTS[1:]).search("will it rain in Oslo", k=5) == []
    finally:
        embedding_module.encoder.cache_clear()
