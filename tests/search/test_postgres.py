from datetime import timedelta

import pytest
from django.db import connection

from toolhub.search import SearchDocument, get_provider
from toolhub.search.postgres import PostgresProvider

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]

DOCUMENTS = [
    SearchDocument("send_invoice", "Mail a bill to a customer.", "billing", ("finance",), {"customer": "Who"}),
    SearchDocument("archive_messages", "Move old invoice emails and other messages to the archive.", "mail"),
    SearchDocument("getWeatherForecast", "Forecast for a city.", "travel", ("weather",), {"city": "City"}),
    SearchDocument("query_express_delivery", "根据快递单号查询包裹的物流轨迹。", "物流", ("快递",)),
]


def rows(key: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM toolhub_search_document WHERE catalogue = %s", [key])
        return cursor.fetchone()[0]


def test_weighted_full_text_search_with_category_filter() -> None:
    assert connection.vendor == "postgresql", "the postgres provider needs PostgreSQL (use `make test`)"
    index = get_provider("postgres").build(DOCUMENTS)
    # the name (weight A) outranks the description (weight C)
    assert index.search("invoices", k=2) == ["send_invoice", "archive_messages"]
    assert index.search("weather forecasts", k=1) == ["getWeatherForecast"]
    assert index.search("我的快递到哪了", k=1) == ["query_express_delivery"]
    assert index.search("invoice", category="mail") == ["archive_messages"]
    # user input is never a syntax error
    assert index.search('"unbalanced & | !(', k=3) == []
    assert index.search("", k=3) == []


def test_a_query_is_read_as_the_lexical_provider_reads_it() -> None:
    index = get_provider("postgres").build(DOCUMENTS)
    # a general synonym finds a tool (email -> "Mail a bill"), below the tool that holds the word typed
    assert index.search("email", k=2) == ["archive_messages", "send_invoice"]
    # a phrasal verb means its concept ("look up" is a search), stop words alone match nothing
    assert index.search("please look up the weather", k=1) == ["getWeatherForecast"]
    assert index.search("can you do it for me", k=3) == []


def test_a_catalogue_only_ever_returns_its_own_tools() -> None:
    # given two principals' catalogues in the same table, one without send_invoice
    provider = PostgresProvider()
    everything = provider.build(DOCUMENTS)
    granted = provider.build(DOCUMENTS[1:])
    # when the narrower one searches for exactly that tool's words, then it never surfaces
    assert "send_invoice" not in granted.search("send invoice billing finance customer", k=10)
    assert everything.search("send invoice", k=1) == ["send_invoice"]


def test_rebuilding_the_same_catalogue_reuses_its_rows_and_prune_removes_unused_ones() -> None:
    provider = PostgresProvider()
    first = provider.build(DOCUMENTS)
    second = provider.build(list(reversed(DOCUMENTS)))
    assert first.key == second.key and rows(first.key) == len(DOCUMENTS)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE toolhub_search_document SET built_at = now() - interval '2 days' WHERE catalogue = %s", [first.key]
        )
    assert provider.prune(unused_for=timedelta(days=1)) == len(DOCUMENTS)
    assert rows(first.key) == 0


def test_an_index_held_while_its_rows_were_pruned_stores_them_again_and_finds() -> None:
    """A process keeps its index until the next governance change; a quiet week and a prune emptied its rows.

    Found (review am): every search then answered "No tool matched" until something changed governance.
    Expect: the search that finds nothing sees the rows gone, stores them again and finds the tool; a search
    matching nothing on rows that are there stays empty and stores nothing.
    """
    provider = PostgresProvider()
    index = provider.build(DOCUMENTS)
    assert index.search("invoice")
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE toolhub_search_document SET built_at = now() - interval '8 days' WHERE catalogue = %s", [index.key]
        )
    assert provider.prune(unused_for=timedelta(days=7)) == len(DOCUMENTS) and rows(index.key) == 0

    assert "send_invoice" in index.search("invoice")
    assert rows(index.key) == len(DOCUMENTS)
    assert index.search("zebra quantum") == [] and rows(index.key) == len(DOCUMENTS)
