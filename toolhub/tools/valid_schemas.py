"""Schemas already found valid against their draft's metaschema in this process, kept by digest.

Checking one costs about 1 ms a subschema (jsonschema resolves the metaschema's references for each): an accepted
remote schema of 9,000 properties (130 KB) took 8.6 s. A remote tool's ``inputSchema`` is checked again each time
the registry builds it (every governance change, in every process), its ``outputSchema`` at each call (a session
per call), synchronously in the worker's event loop, where the call's timeout cannot cut it. Validity depends on
the schema and the draft only, so a schema found valid once is not checked again.

Only a schema that is plain JSON is kept: one that reads back from its JSON text as itself. The text writes a tuple
as a list and a key ``1`` as ``"1"``, but the metaschema check calls a tuple no array: keyed by its text, a schema
refused alone was accepted once its list form had been checked.
"""

import hashlib
import json
import threading
from typing import Any

__all__ = ["check_against_metaschema"]

#: Digests of the latest schemas found valid (a digest: a schema may be large).
_KEPT = 4096
_valid: dict[bytes, None] = {}
_lock = threading.Lock()


def check_against_metaschema(cls: Any, schema: dict[str, Any], format_checker: Any) -> None:
    """``cls.check_schema`` (``SchemaError`` if invalid), skipped for a schema this process found valid before."""
    key = _digest(cls, schema)
    if key is not None:
        with _lock:
            if key in _valid:
                return
    cls.check_schema(schema, format_checker=format_checker)
    if key is not None:
        with _lock:
            if len(_valid) >= _KEPT:
                del _valid[next(iter(_valid))]  # the oldest
            _valid[key] = None


def _digest(cls: Any, schema: dict[str, Any]) -> bytes | None:
    """The schema's digest with its draft's, or ``None`` for one that is not plain JSON (checked every time)."""
    try:
        canonical = json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        if json.loads(canonical) != schema:  # a tuple, a key not a string: the text stands for another schema
            return None
    except (TypeError, ValueError, RecursionError):
        return None
    text = f"{cls.__module__}.{cls.__qualname__}\n{canonical}"
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
