from toolhub.search.text import analyze, expand, plain_words, query_words, split_identifier


def test_identifiers_split_on_snake_camel_kebab_and_digits() -> None:
    assert split_identifier("send_email") == ["send", "email"]
    assert split_identifier("sendEmail") == ["send", "email"]
    assert split_identifier("parseHTTPResponse2") == ["parse", "http", "response", "2"]
    assert split_identifier("create-dns-record") == ["create", "dns", "record"]


def test_words_are_stemmed_and_stop_words_dropped() -> None:
    # given inflected forms and filler words, when analyzed, then they meet on one stem each
    assert analyze("Please cancel the orders") == analyze("cancelled order")
    assert "the" not in analyze("the invoices")
    assert analyze("invoices") == analyze("invoice")


def test_cjk_runs_become_characters_and_bigrams_without_a_dictionary() -> None:
    assert analyze("天气预报") == ("天", "气", "预", "报", "天气", "气预", "预报")
    assert analyze("下雨 rain") == ("下", "雨", "下雨", "rain")
    assert analyze("雨") == ("雨",)


def test_synonyms_expand_queries_below_the_typed_words() -> None:
    weights = expand(analyze("remove file"))
    assert weights[analyze("remove")[0]] == 1.0
    assert weights[analyze("delete")[0]] == 0.5


def test_plain_words_keep_words_unstemmed_for_postgres() -> None:
    assert plain_words("listRunningPods 天气") == "list running pods 天 气 天气"


def test_query_words_are_unstemmed_typed_words_then_what_lexical_search_adds() -> None:
    # given a phrasal verb, a value and filler words, when read for an engine that stems itself
    words = query_words("please call off the review with jane@acme.com")
    # then the phrase stands as its concept, filler is gone, and words stay as written (PostgreSQL stems them)
    assert words.typed == ("review", "jane", "acme", "com", "cancel")
    # and the value's concepts and the synonyms of the typed words come after, none of them a typed word again
    assert words.added[:2] == ("email", "address")
    assert {"abort", "revoke"} <= set(words.added) and not set(words.added) & set(words.typed)
    # inflected forms meet their group by stem
    assert "delete" in query_words("removing files").added
    assert query_words("can you do it for me") == query_words("")
    assert query_words("天气").typed == ("天", "气", "天气")
