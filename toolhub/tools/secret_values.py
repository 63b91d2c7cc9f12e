"""Which texts are a secret: the values of a call's withheld arguments and ``Secret`` presets, and their forms.

``SecretScrubber`` (``toolhub.tools.secrets``) replaces what is found here. A value is found as a tool would write
it (each string or number within it, a pydantic secret by its value, not its mask) and matched in the forms an
exception or a log line typically carries it (``text_forms``). Values shorter than ``MIN_SECRET_LENGTH`` characters
are never secrets: every occurrence of a common short string would be replaced.
"""

import base64
import json
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

from pydantic import Secret as PydanticSecret
from pydantic import SecretBytes, SecretStr
from pydantic_core import to_jsonable_python

__all__ = ["MIN_SECRET_LENGTH", "secret_texts", "sensitive_values", "text_forms"]

MIN_SECRET_LENGTH = 4


def sensitive_values(
    arguments: Mapping[str, Any], sensitive: Iterable[str], *, declared: Collection[str] = ()
) -> list[str]:
    """The values of ``arguments``' sensitive names as text: each string or number within them, nested too.

    A mapping's keys count as its values do (a split payment keyed by IBAN), except the names ``declared``
    by the tool's schema (``Tool.declared_names``: a model's fields, published with the tool).

    ``arguments`` as stored (JSON) or as validated for the tool: a model's or a dataclass's fields, a
    ``Decimal``, a ``UUID``, a date are found as the tool would write them (their text) and as JSON; a pydantic
    secret by its value, not its mask.
    """
    found: list[str] = []
    for name in sensitive:
        if name in arguments:
            _collect_texts(arguments[name], found, keys=lambda key: key not in declared)
    return found


def secret_texts(value: Any) -> list[str]:
    """A ``Secret`` preset's value as the texts a tool could repeat: each string or number within it, nested too.

    A setting may hold more than a string: a credentials mapping (``{"user": ..., "password": ...}``), a list of
    keys, a pydantic ``SecretStr`` from a settings library. Its whole ``str()`` is no text a tool repeats; its
    password is. A mapping's keys are the setting's field names, not secrets.
    """
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    found: list[str] = []
    _collect_texts(value, found, keys=lambda key: False)
    return found


def _collect_texts(value: Any, found: list[str], *, keys: Callable[[Any], bool]) -> None:
    """Append each string or number within ``value`` to ``found``, as a tool writes it; ``keys``: which keys count."""
    if isinstance(value, str):
        found.append(value)
    elif value is None or isinstance(value, bool):
        return
    elif isinstance(value, PydanticSecret | SecretStr | SecretBytes):
        secret = value.get_secret_value()  # its text is only the mask
        _collect_texts(secret.decode("utf-8", "replace") if isinstance(secret, bytes) else secret, found, keys=keys)
    elif isinstance(value, int | float):
        found.append(str(value))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if keys(key):
                _collect_texts(key, found, keys=keys)
            _collect_texts(item, found, keys=keys)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            _collect_texts(item, found, keys=keys)
    else:
        jsonable = to_jsonable_python(value, fallback=str)
        if not isinstance(jsonable, Mapping | list):
            found.append(str(value))  # Decimal("98765.43"), a UUID, a date: as an f-string writes them
        if jsonable != str(value):
            _collect_texts(jsonable, found, keys=keys)


def text_forms(value: str) -> set[str]:
    """The value as an exception message, a repr, JSON, a URL, a bytes repr or base64 (padded or not) would show it."""
    forms = {
        value,
        repr(value)[1:-1],
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        quote(value, safe=""),
        quote_plus(value),
        repr(value.encode("utf-8"))[2:-1],
    }
    raw = value.encode("utf-8")
    for encoded in (base64.b64encode(raw), base64.urlsafe_b64encode(raw)):
        forms.update({encoded.decode("ascii"), encoded.decode("ascii").rstrip("=")})
    return {form for form in forms if len(form) >= MIN_SECRET_LENGTH}
