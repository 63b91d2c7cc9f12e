"""Which existing username a new one reads as: Unicode's "skeleton" (UTS #39 4), from confusables.txt.

``toolhub.visible.lookalike_problem`` refuses what a name shows on its own (characters drawn as nothing, a mix of
scripts). A name in one script can still read as another: ``ɑlice`` (a Latin alpha), ``alıce`` (a dotless i),
``ali̇ce`` (an i with a second dot), or a whole-script copy, ``расе`` all Cyrillic (``pace``) or ``ᎪᏞᎥᏟᎬ`` all
Cherokee. Two names are confusable when their skeletons are equal: each character replaced by its prototype in
Unicode's confusables.txt, read after case folding too (``aIice`` reads as ``alice``, as Django's own rule already
holds ``Alice`` to; ASCII names too: ``paypa1`` reads as ``paypal``, ``b0b`` as ``bob``), and a letter of no case drawn
as a capital I read as a folded one (the all-Lisu ``ꓮꓓꓟꓲꓠ`` reads as ``admin``, as ``ADMIN`` does). Such a name
is refused while an account reading the same exists, and the refusal names that account: only people who change
accounts see it, and they see every account (``TenantUserAdmin`` is ``CrossTenantChangesOnly``).

A name that reads as no existing account is accepted, even in another script whose skeleton is plain ASCII: ``Вера``
(Vera) and ``Тарас`` (Taras) read as Latin ``Bepa`` and ``Tapac`` and are real names. Refusing every such name would
refuse Russian, Greek or Cherokee people for what their names look like, and gains little here: accounts are made
by platform administrators, not by whoever signs up first, and the rule goes both ways, so the ASCII account that a
copy would impersonate cannot be added beside it either (its administrator is told which account it reads as).

The data is the ``confusable_homoglyphs`` package's (Unicode's confusables.txt, kept to date there; its JSON lists
each pair both ways): a prototype is the member of its pairs that is never a source, a source's only entry is its
prototype; of a lone pair, the member found inside a longer prototype (``(木)``), else the ASCII one, else either
(equal skeletons stay equal). Checked against a confusables.txt (Unicode 13): 6,271 of its 6,311 pairs read alike;
the rest pair combining marks, compatibility characters (which Django's form stores NFKC) or line separators
(refused as invisible), or changed since.

Cost: no column is stored (``auth.User`` is Django's). A new or changed name is compared with one query streaming
the other usernames only, each read through a precomputed table: about 0.2 s for twenty thousand lower-case
names (0.4 s mixed-case, read both folded and not), and only when an administrator chooses a name (a name
already stored is left to its owner).
"""

import functools
import json
import unicodedata
from importlib import resources

from django.contrib.auth import get_user_model

__all__ = ["reads_as_existing", "skeleton"]

_LRM = "\u200e"  # confusables.txt writes right-to-left characters between marks; they are no part of the character
#: A dot above on a soft-dotted letter (``i``, ``j``) is drawn as the letter's own dot: ``i̇`` reads as ``i``.
_SOFT_DOTTED_DOT = (("i\u0307", "i"), ("j\u0307", "j"))


@functools.cache
def _prototypes() -> dict[str, str]:
    """Each confusable character's prototype (characters not listed are their own)."""
    data = resources.files("confusable_homoglyphs").joinpath("confusables.json").read_text(encoding="utf-8")
    pairs = {
        key.strip(_LRM): [entry["c"].strip(_LRM) for entry in entries] for key, entries in json.loads(data).items()
    }
    in_prototypes = {char for key in pairs if len(key) > 1 for char in key}  # a longer prototype's are prototypes
    table: dict[str, str] = {}
    for char, others in pairs.items():
        if len(char) != 1 or len(others) != 1:
            continue  # a prototype of several sources, or one of several characters (``rn``): its own
        other = others[0]
        if len(pairs.get(other, ())) > 1 or len(other) != 1:
            table[char] = other  # a source, whose only entry is its prototype
        else:  # a lone pair: the prototype if a longer one shows it, else the ASCII member, else either (the same)
            table[char] = min(
                char, other, key=lambda member: (member not in in_prototypes, not member.isascii(), member)
            )
    return {char: prototype for char, prototype in table.items() if char != prototype}


def _fold(text: str) -> str:
    """``text`` in one case, each character folded to one (Unicode's simple case folding): ``ß`` stays ``ß``.

    Full folding (``str.casefold``) spells ``ß`` as ``ss``: a spelling, not a case, and UTS #39 keeps them apart
    (``ß`` is the prototype of ``β``), so ``strauß`` would be refused beside ``strauss``.
    """
    full = text.casefold()
    if len(full) == len(text):
        return full  # each character folded to one (the usual case: one call, not one per character)
    return "".join(folded if len(folded := char.casefold()) == 1 else char.lower() for char in text)


def skeleton(name: str) -> str:
    """``name`` as it reads: UTS #39's skeleton, read again after case folding (``aIice``, ``Alice``: ``alice``)."""
    table = _prototypes()

    def mapped(text: str) -> str:
        text = unicodedata.normalize("NFD", text)
        for dotted, letter in _SOFT_DOTTED_DOT:
            text = text.replace(dotted, letter)
        return unicodedata.normalize("NFD", "".join(table.get(char, char) for char in text))

    return mapped(_fold(mapped(name)))


@functools.cache
def _caseless_capital_i() -> dict[int, str]:
    """Letters of no case drawn as a capital I (Lisu ``ꓲ``, Runic ``ᛁ``), each to be read as ``i`` too."""
    return {
        ord(char): "i"
        for char, prototype in _prototypes().items()
        if prototype == "l" and char.isalpha() and not (char.islower() or char.isupper())
    }


def _readings(name: str) -> frozenset[str]:
    """Its skeleton, and its case folding's (``ALICE``: capital I is read as l before folding, as i after).

    A copy in capitals of a script without case (Lisu ``ꓮꓓꓟꓲꓠ``) has no folding: its ``ꓲ`` is read as ``i`` too, as
    a capital I is once folded, so it reads as ``admin`` as Latin ``ADMIN`` does. A name in compatibility letters
    (``ａｄｍｉｎ`` fullwidth, saved by code or an import: Django's forms store NFKC) is read as its NFKC form too, as
    a chosen name is (``admin_usernames.username_problem``): the rule goes both ways.
    """
    readings = _name_readings(name)
    if name.isascii() or unicodedata.is_normalized("NFKC", name):
        return readings
    return readings | _name_readings(unicodedata.normalize("NFKC", name))


def _name_readings(name: str) -> frozenset[str]:
    """:func:`_readings` of a name as written."""
    folded = _fold(name)
    readings = {skeleton(name), skeleton(folded)} if folded != name else {skeleton(name)}
    capitals = folded.translate(_caseless_capital_i())
    if capitals != folded:
        readings.add(skeleton(capitals))
    return frozenset(readings)


def reads_as_existing(name: str, *, other_than: int | str | None = None) -> str | None:
    """The username of an existing account (not ``other_than``'s, a primary key) that ``name`` reads as, if any."""
    target = _readings(name)
    model = get_user_model()
    users = model._default_manager.exclude(pk=other_than) if other_than is not None else model._default_manager.all()
    field = model.USERNAME_FIELD
    for existing in users.values_list(field, flat=True).iterator(chunk_size=2000):
        if target & _readings(existing):
            return str(existing)
    return None
