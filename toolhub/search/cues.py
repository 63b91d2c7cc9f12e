"""What a query's form says that its words alone do not: an address means email, ``#name`` a channel, ...

People name things by example: they type the address, the host name, the amount or the time instead of
the word for it, and phrasal verbs ("call off", "get rid of") whose particle the stop words drop. Each cue
is a general pattern of form or a common English phrasal verb, never a catalogue's names or words
(``toolhub.search.text.expand`` weighs what they add):

- a value's form adds its concept words, below the words typed (``jane@acme.com`` adds ``email``);
- a phrasal verb means its concept instead of its verb: "call off" is ``cancel``, not a call, so the
  concept stands as if typed and the phrase's own words are dropped.
"""

import re
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["Cues", "query_cues", "rewritten_query"]

#: Words that name a time ("Friday", "tomorrow", "next week", "3pm").
_WHEN = (
    r"(?:next |this |the )?(?:mon|tues|wednes|thurs|fri|satur|sun)day|tomorrow|tonight|today|later|"
    r"(?:next |this )?(?:week|month|morning|afternoon|evening)|\d{1,2}(?::\d{2})?\s?(?:am|pm)?\b"
)
_TLD = r"(?:com|org|net|io|dev|app|co|ai|cloud|info|biz|us|uk|de|fr|cn|jp|eu)"


def _compiled(cues: tuple[tuple[str, str], ...]) -> tuple[tuple[re.Pattern[str], tuple[str, ...]], ...]:
    return tuple((re.compile(pattern, re.IGNORECASE), tuple(words.split())) for pattern, words in cues)


#: A value's form: (pattern, case-insensitive unless it says otherwise; the concept words it stands for).
_FORMS = _compiled(
    (
        (r"[\w.+-]+@[\w-]+\.[\w.-]+", "email address"),
        (r"(?<![\w@.])@[a-z][\w.-]*", "mention user message"),
        (r"(?<![\w&#])#[a-z][\w-]*", "channel message chat"),
        (r"\bhttps?://\S+|\bwww\.\S+", "url link web page"),
        (rf"(?<![@\w.-])(?:[a-z0-9-]+\.)+{_TLD}\b(?!@)", "domain host dns website"),
        (r"\b\d{1,3}(?:\.\d{1,3}){3}\b", "ip address host network"),
        (r"(?<![\w.])\+\d[\d ()-]{7,}\d", "phone number"),
        (
            r"[$€£¥]\s?\d|\b\d+(?:[.,]\d+)?\s?(?:dollars?|usd|euros?|eur|pounds?|gbp|yen|jpy|cents?|francs?)\b",
            "price amount money",
        ),
        (r"\b\d+(?:\.\d+)?\s?%\s*of\b|\b\d+\s*[-+*/×÷^]\s*\d+\b", "calculate math"),
        (r"\b\d{1,2}(?::\d{2})?\s?(?:am|pm)\b", "time"),
        (r"\b[\w-]+\.(?:pdf|docx?|xlsx?|csv|pptx?|txt|md|png|jpe?g|gif|zip)\b", "file document"),
        (r"\b[a-z]+_[a-z0-9_]+\b|\b\w+\(\)|(?-i:\b[a-z]+[A-Z][A-Za-z0-9]*\b)", "code function"),
        (r"\b(?:days?|time) off\b", "leave vacation absence"),
    )
)

#: Phrasal verbs (the particle carries the meaning and is a stop word on its own): (pattern, concept words).
#: The phrase's own words give way to the concept; its object between verb and particle (``between``) stays.
_PHRASES = _compiled(
    (
        (r"\bcall(?:s|ed|ing)? (?P<between>(?:\w+ )?)off\b", "cancel"),
        (r"\bget(?:s|ting)? rid of\b|\bthrow(?:s|ing)? away\b", "delete remove"),
        (r"\blook(?:s|ed|ing)? up\b", "search find lookup"),
        (r"\bset(?:s|ting)? up\b", "create configure setup"),
        (r"\bsign(?:s|ed|ing)? up\b", "register"),
        (r"\bspin(?:s|ning)? up\b", "create start"),
        (r"\bshut(?:s|ting)? down\b|\bturn(?:s|ed|ing)? off\b", "stop disable"),
        (r"\bturn(?:s|ed|ing)? on\b", "enable start"),
        # to another time: "push the review to Friday", "move it to 3pm" (not "move the file to the archive")
        (
            rf"\b(?:push|move|bump)(?:es|ed|ing|s|d)? (?P<between>(?:\w+ ){{0,3}})to (?=(?:{_WHEN}))"
            r"|\bpush(?:es|ed|ing)? (?P<between2>(?:\w+ ){0,3})back\b",
            "reschedule postpone",
        ),
        (rf"\btak(?:e|es|ing) (?P<between>(?:next |this |the )?(?:{_WHEN})s? )off\b", "leave vacation absence"),
        (r"\bfill(?:s|ed|ing)? (?:in|out)\b", "complete form"),
        (r"\bwrite (?P<between>(?:\w+ )?)up\b|\bdraw(?:s|ing)? up\b", "draft write"),
        (r"\bnudge\b|\bremind\b", "remind reminder"),
        (
            r"\bclaim (?P<between>(?:\w+ )?)back\b|\bpaid (?:for )?(?P<between2>(?:\w+ ){0,3})myself\b",
            "reimburse expense",
        ),
    )
)


@dataclass(frozen=True)
class Cues:
    """What a query's cues say: words its values stand for, words its phrases mean, and the words they replace."""

    implied: tuple[str, ...] = ()
    meant: tuple[str, ...] = ()
    replaced: tuple[str, ...] = ()


@lru_cache(maxsize=20_000)
def query_cues(query: str) -> Cues:
    """The cues of ``query`` (words unanalyzed, in cue order, each once)."""
    implied = {word: None for pattern, words in _FORMS if pattern.search(query) for word in words}
    meant: dict[str, None] = {}
    replaced: dict[str, None] = {}
    for pattern, words in _PHRASES:
        for match in pattern.finditer(query):
            meant.update(dict.fromkeys(words))
            kept = set(_between(match).split())
            replaced.update(dict.fromkeys(word for word in match.group().split() if word not in kept))
    return Cues(tuple(implied), tuple(meant), tuple(replaced))


@lru_cache(maxsize=20_000)
def rewritten_query(query: str) -> str:
    """``query`` in words a reader of meaning takes as meant (an embedding model): for providers that read text.

    Each phrasal verb becomes its concept's first word in place of its verb, its particle dropped ("call off
    the standup" reads "cancel the standup"); the concepts a value implies follow in parentheses
    ("a note to jane@acme.com (email, address)").
    """
    text = query
    for pattern, words in _PHRASES:
        text = pattern.sub(lambda match, concept=words[0]: _in_place(match, concept), text)
    implied = query_cues(query).implied
    return f"{text} ({', '.join(implied)})" if implied else text


def _between(match: re.Match[str]) -> str:
    """The words between a phrasal verb and its particle (its object), if the pattern lets any stand there."""
    return "".join(value or "" for name, value in match.groupdict().items() if name.startswith("between"))


def _in_place(match: re.Match[str], concept: str) -> str:
    phrase = match.group()
    trailing = phrase[len(phrase.rstrip()) :]  # a match that ends before a lookahead keeps its space
    return " ".join([concept, *_between(match).split()]) + trailing
