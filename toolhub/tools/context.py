"""ToolContext: immutable out-of-band values a tool receives but the model never sees or sets."""

import re
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

from toolhub.tools.tenant_arguments import is_tenant_argument

__all__ = ["ToolContext", "RESERVED_CONTEXT_KEYS", "context_key_named"]

#: Keys only the boundary (the authenticated request, the pipeline) may set; ``compensates`` names the step a
#: saga's compensation undoes (``toolhub.sagas.compensating``), so a tool may trust it marks a compensation.
RESERVED_CONTEXT_KEYS = frozenset(
    {"tenant", "user", "user_id", "run_id", "loop_id", "call_id", "idempotency_key", "agent", "saga_id", "compensates"}
)


#: The spellings (case and separators ignored) a developer reads as the caller's context: the reserved keys,
#: tenants aside (a tenant argument must name the caller's own), and ``ctx``, the context parameter's usual name.
_CONTEXT_NAMES = {
    re.sub(r"[^a-z0-9]", "", key): key for key in (*RESERVED_CONTEXT_KEYS, "ctx") if not is_tenant_argument(key)
}


def context_key_named(name: str) -> str | None:
    """The context key (or ``ctx``) an argument name spells, case and separators ignored: ``userId`` -> ``user_id``."""
    return _CONTEXT_NAMES.get(re.sub(r"[^a-z0-9]", "", name.casefold()))


class ToolContext(Mapping[str, Any]):
    """An immutable mapping of context values (tenant, user, run id, call id, custom keys).

    It is set at the boundary from the authenticated request, never from model output. ``merged``
    layers a more specific context (an interaction) over a broader one (a run): the later one wins.
    """

    __slots__ = ("_values",)
    _values: MappingProxyType[str, Any]

    def __init__(self, values: Mapping[str, Any] | None = None, /, **kwargs: Any) -> None:
        merged = dict(values or {})
        merged.update(kwargs)
        object.__setattr__(self, "_values", MappingProxyType(merged))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("ToolContext is immutable; use merged() or with_values() for a new one")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("ToolContext is immutable; use merged() or with_values() for a new one")

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"ToolContext({dict(self._values)!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return dict(self._values) == dict(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(sorted((k, repr(v)) for k, v in self._values.items())))

    def merged(self, other: Mapping[str, Any] | None) -> "ToolContext":
        """Return a new context with ``other`` layered on top (its values win on conflicts)."""
        if not other:
            return self
        return ToolContext({**self._values, **other})

    @classmethod
    def layered(
        cls,
        run: Mapping[str, Any] | None = None,
        interaction: Mapping[str, Any] | None = None,
        *,
        boundary: Mapping[str, Any] | None = None,
    ) -> "ToolContext":
        """Merge run-level context, then per-interaction context (it wins on conflicts), then the boundary's.

        The boundary (the authenticated request, the pipeline) has the last word: reserved keys
        (tenant, user, run id, ...) in the run's or the interaction's values never override it.
        """
        merged = dict(run or {})
        merged.update(interaction or {})
        if boundary:
            merged.update(boundary)
        return cls(merged)

    def with_values(self, **values: Any) -> "ToolContext":
        """Return a new context with ``values`` set."""
        return self.merged(values)

    def as_dict(self) -> dict[str, Any]:
        """Return a plain, mutable copy."""
        return dict(self._values)

    @property
    def tenant(self) -> str | None:
        return self._values.get("tenant")

    @property
    def user(self) -> str | None:
        return self._values.get("user")

    @property
    def user_id(self) -> int | None:
        return self._values.get("user_id")

    @property
    def run_id(self) -> str | None:
        return self._values.get("run_id")

    @property
    def loop_id(self) -> str | None:
        return self._values.get("loop_id")

    @property
    def call_id(self) -> str | None:
        return self._values.get("call_id")

    @property
    def correlation_id(self) -> str | None:
        return self._values.get("correlation_id")

    @property
    def idempotency_key(self) -> str | None:
        """A key stable across retries of one call, to pass to downstream systems."""
        return self._values.get("idempotency_key") or self._values.get("call_id")
