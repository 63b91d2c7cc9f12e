"""A query's form and its phrasal verbs say what its words alone do not (``toolhub.search.cues``)."""

import pytest

from toolhub.search.cues import Cues, query_cues, rewritten_query
from toolhub.search.text import analyze, expand


@pytest.mark.parametrize(
    ("query", "implied"),
    [
        ("shoot a note to jane@acme.com", "email"),
        ("let the #backend team know", "channel"),
        ("ping @maria about it", "mention"),
        ("open https://status.example.org for me", "url"),
        ("point shop.example.com at the new balancer", "dns"),
        ("block 10.0.0.12 at the firewall", "ip"),
        ("text +44 20 7946 0958 that I am late", "phone"),
        ("boots under 100 dollars", "price"),
        ("anything below $40?", "price"),
        ("what's 17% of 2350", "calculate"),
        ("what is 12 * 7", "calculate"),
        ("meet at 3pm", "time"),
        ("send me report_q3.xlsx", "file"),
        ("where do we call parse_date", "code"),
        ("who calls parseDate", "code"),
        ("I need two days off", "leave"),
    ],
)
def test_a_value_s_form_implies_its_concept(query: str, implied: str) -> None:
    cues = query_cues(query)
    assert implied in cues.implied and not cues.replaced


@pytest.mark.parametrize(
    "query",
    [
        "send an email to the team",  # the word itself, no address
        "the #1 priority",  # a number, not a channel
        "meet at 3",  # no am/pm
        "version 2.0 of the app",  # not a host name
        "parse the date",  # words, not an identifier
    ],
)
def test_plain_words_imply_nothing(query: str) -> None:
    assert query_cues(query).implied == ()


@pytest.mark.parametrize(
    ("query", "meant", "replaced"),
    [
        ("call off tomorrow's standup", "cancel", ("call", "off")),
        ("get rid of the old draft", "delete", ("get", "rid", "of")),
        ("look up the phone extension", "search", ("look", "up")),
        ("push the design review to Friday", "reschedule", ("push", "to")),
        ("move it to Thursday", "reschedule", ("move", "to")),
        ("nudge me about the dentist", "reminder", ("nudge",)),
        ("I want to take next Friday off", "leave", ("take", "off")),
    ],
)
def test_a_phrasal_verb_means_its_concept_in_place_of_its_verb(
    query: str, meant: str, replaced: tuple[str, ...]
) -> None:
    cues = query_cues(query)
    assert meant in cues.meant and cues.replaced == replaced


def test_a_query_without_cues_has_none() -> None:
    assert query_cues("show the invoices of March") == Cues()


def test_expand_weighs_implied_words_below_the_typed_ones() -> None:
    # given an address, whose form implies email
    weights = expand(analyze("a note to jane@acme.com"), query="a note to jane@acme.com")

    # then email is looked up, below the typed words
    assert weights[analyze("note")[0]] == 1.0
    assert weights[analyze("email")[0]] == 0.5


def test_expand_puts_a_phrasal_verb_s_concept_in_place_of_its_verb() -> None:
    # given "call off" (to cancel, not to call)
    query = "call off tomorrow's standup"
    weights = expand(analyze(query), query=query)

    # then cancel stands as typed, and the verb no longer looks up calls; the words between stay
    assert weights[analyze("cancel")[0]] == 1.0
    assert analyze("call")[0] not in weights
    assert weights[analyze("standup")[0]] == 1.0


def test_expand_without_the_query_text_has_no_cues() -> None:
    assert expand(analyze("call off the standup")) == expand(analyze("call off the standup"), query="")


@pytest.mark.parametrize(
    "query", ["move the report to the shared folder", "push the new build to production", "take the lid off"]
)
def test_a_verb_with_its_particle_but_another_sense_is_left_alone(query: str) -> None:
    assert query_cues(query).meant == ()


@pytest.mark.parametrize(
    ("query", "rewritten"),
    [
        ("call off tomorrow's standup", "cancel tomorrow's standup"),
        ("push the design review to Friday afternoon", "reschedule the design review Friday afternoon"),
        ("get rid of the old draft", "delete the old draft"),
        ("I want to take next Friday off", "I want to leave next Friday"),
        ("a note to jane@acme.com", "a note to jane@acme.com (email, address)"),
        ("show the invoices of March", "show the invoices of March"),
    ],
)
def test_a_reader_of_meaning_gets_the_query_in_the_words_meant(query: str, rewritten: str) -> None:
    assert rewritten_query(query) == rewritten
