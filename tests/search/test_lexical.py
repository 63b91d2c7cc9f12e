import pytest

from toolhub import tool
from toolhub.search import SearchDocument, document_from_tool, get_provider
from toolhub.search.lexical import LexicalProvider, NaiveBM25Provider


@pytest.fixture
def documents() -> list[SearchDocument]:
    return [
        SearchDocument("send_invoice", "Mail a bill to a customer.", "billing", ("finance",), {"customer": "Who"}),
        SearchDocument("archive_messages", "Move old invoice emails and other messages to the archive.", "mail"),
        SearchDocument("getWeatherForecast", "Forecast for a city.", "travel", ("weather",), {"city": "City"}),
        SearchDocument("query_express_delivery", "根据快递单号查询包裹的物流轨迹。", "物流", ("快递",)),
        SearchDocument("delete_file", "Move a file to the trash.", "files"),
    ]


def test_default_provider_is_lexical() -> None:
    assert isinstance(get_provider(), LexicalProvider)


def test_unknown_provider_names_the_known_ones() -> None:
    with pytest.raises(LookupError, match="lexical"):
        get_provider("nosuch")


def test_a_word_in_the_name_outranks_the_same_word_in_a_description(documents: list[SearchDocument]) -> None:
    index = LexicalProvider().build(documents)
    assert index.search("invoice", k=2) == ["send_invoice", "archive_messages"]


def test_camel_case_names_and_inflections_match(documents: list[SearchDocument]) -> None:
    index = LexicalProvider().build(documents)
    assert index.search("weather forecasts", k=1) == ["getWeatherForecast"]


def test_chinese_query_without_spaces_finds_the_chinese_tool(documents: list[SearchDocument]) -> None:
    index = LexicalProvider().build(documents)
    assert index.search("我的快递到哪了", k=1) == ["query_express_delivery"]


def test_synonyms_reach_a_tool_described_in_other_words(documents: list[SearchDocument]) -> None:
    index = LexicalProvider().build(documents)
    assert index.search("erase a document", k=1) == ["delete_file"]


def test_category_filter_and_k(documents: list[SearchDocument]) -> None:
    index = LexicalProvider().build(documents)
    assert index.search("invoice", k=5, category="mail") == ["archive_messages"]
    assert index.search("invoice", k=0) == []
    assert index.search("invoice", category="no such category") == []


def test_only_the_documents_given_are_ever_returned(documents: list[SearchDocument]) -> None:
    # given an index built from a subset (what a principal is granted), when searching for the others' words
    index = LexicalProvider().build(documents[1:])
    # then the tool left out never appears, however exact the query
    assert "send_invoice" not in index.search("send_invoice billing finance customer", k=10)


def test_queries_matching_nothing_return_nothing(documents: list[SearchDocument]) -> None:
    index = LexicalProvider().build(documents)
    assert index.search("") == []
    assert index.search("zzzz qqqq") == []
    assert LexicalProvider().build([]).search("invoice") == []


def test_naive_baseline_does_not_split_names(documents: list[SearchDocument]) -> None:
    index = NaiveBM25Provider().build(documents)
    assert index.search("weather forecast", k=5) == ["getWeatherForecast"]
    assert "getWeatherForecast" not in index.search("get", k=5)


def test_document_from_tool_takes_the_definition_the_model_reads() -> None:
    @tool(category="billing", tags={"finance", "email"})
    def send_invoice(customer: str, amount: float) -> str:
        """Mail a bill to a customer.

        Args:
            customer: Who receives it.
            amount: Total in euros.
        """
        return "sent"

    document = document_from_tool(send_invoice.tool)
    assert document.name == "send_invoice"
    assert document.category == "billing"
    assert document.tags == ("email", "finance")
    assert "bill" in document.description
    assert document.parameters == {"customer": "Who receives it.", "amount": "Total in euros."}
