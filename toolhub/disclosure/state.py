"""What one run can see, as stored on the run: the same tools on any worker after any restart."""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["DisclosureState", "done_among", "done_names"]

#: Longest list of names kept in any field (a run never sees more tools than this at once).
MAX_NAMES = 500


def _names(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        return ()
    return tuple(str(item)[:200] for item in value if isinstance(item, str))[:MAX_NAMES]


def _objects(value: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k)[:200]: dict(v) for k, v in list(value.items())[:MAX_NAMES] if isinstance(v, Mapping)}


def done_names(entries: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Every tool named done in agentic entries (each playbook's ``done``), once each, in order."""
    names = [
        name
        for entry in entries.values()
        if isinstance(entry.get("done"), list)
        for name in entry["done"]
        if isinstance(name, str)
    ]
    return list(dict.fromkeys(names))


def done_among(entries: Mapping[str, Mapping[str, Any]], names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Agentic entries with each playbook's done tools cut to ``names``, the rest of each entry as it is.

    What a playbook's status line reads (``Done so far: ...``) wherever a model is shown one: the run's guide
    (``visibility._disclose``), an agentic tool's inner model (``agentic.inner.InnerState``), and what people
    read (``naming_only``). The state kept keeps every done tool, as its gate needs them; a tool revoked since
    is named to no one.
    """
    kept = set(names)
    cut = {key: dict(value) for key, value in entries.items()}
    for entry in cut.values():
        if isinstance(entry.get("done"), list):
            entry["done"] = [name for name in entry["done"] if name in kept]
    return cut


@dataclass(frozen=True)
class DisclosureState:
    """The visible-tool state of a run; JSON in ``AgentRun.disclosure``.

    ``active_groups`` is ``None`` while the groups' activation rules decide, and the model's choice
    once it called ``reset_equipped_tools``. ``unfolded`` maps each facade called (in order) to the
    tools it revealed; ``exclusive`` names the exclusive facade that hides every other tool until the
    run ends. ``hits`` are the latest ``tool_search`` results (the latest search replaces earlier
    hits). ``visible`` is what the model was last sent, for operators and auditors.
    """

    active_groups: tuple[str, ...] | None = None
    unfolded: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    exclusive: str = ""
    hits: tuple[str, ...] = ()
    visible: tuple[str, ...] = ()
    #: Agentic tools' run state (``toolhub.agentic``): a playbook's done tools, a state machine's state.
    agentic: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: Chained domain objects, latest per type name: ``{"call_id": ..., "data": {...}}``.
    chained: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any) -> "DisclosureState":
        """Read a stored state; anything malformed reads as the empty state (nothing extra shown)."""
        if not isinstance(data, Mapping):
            return cls()
        groups = data.get("active_groups")
        unfolded = data.get("unfolded")
        return cls(
            active_groups=_names(groups) if isinstance(groups, list) else None,
            unfolded={str(k)[:200]: _names(v) for k, v in unfolded.items()} if isinstance(unfolded, Mapping) else {},
            exclusive=str(data.get("exclusive") or "")[:200],
            hits=_names(data.get("hits")),
            visible=_names(data.get("visible")),
            agentic=_objects(data.get("agentic")),
            chained=_objects(data.get("chained")),
        )

    def to_json(self) -> dict[str, Any]:
        # Agentic state is written only once a run has some, so runs without agentic tools store what they did.
        agentic = {"agentic": {k: dict(v) for k, v in self.agentic.items()}} if self.agentic else {}
        chained = {"chained": {k: dict(v) for k, v in self.chained.items()}} if self.chained else {}
        return {
            "active_groups": list(self.active_groups) if self.active_groups is not None else None,
            "unfolded": {name: list(children) for name, children in self.unfolded.items()},
            "exclusive": self.exclusive,
            "hits": list(self.hits),
            "visible": list(self.visible),
            **agentic,
            **chained,
        }

    def with_unfolded(self, facade: str, children: list[str], *, exclusive: bool) -> "DisclosureState":
        """The state after ``facade`` was called: its children shown (an exclusive facade hides the rest)."""
        unfolded = {**self.unfolded, facade: tuple(children)[:MAX_NAMES]}
        return replace(
            self, unfolded=unfolded, exclusive=facade if exclusive and not self.exclusive else self.exclusive
        )

    def with_hits(self, names: list[str]) -> "DisclosureState":
        """The latest search's hits replace the previous ones."""
        return replace(self, hits=_names(names))

    def with_groups(self, groups: list[str]) -> "DisclosureState":
        return replace(self, active_groups=_names(groups))

    def with_agentic(self, name: str, value: Mapping[str, Any]) -> "DisclosureState":
        """An agentic tool's new run state (``toolhub.agentic``)."""
        return replace(self, agentic={**self.agentic, name[:200]: dict(value)})

    def with_chained(self, type_name: str, value: Mapping[str, Any]) -> "DisclosureState":
        """The latest object of a chained type replaces the earlier one."""
        return replace(self, chained={**self.chained, type_name[:200]: dict(value)})

    def keeping(self, names: Iterable[str]) -> "DisclosureState":
        """The state naming only ``names``: the unfolded facades and inner tools and the hits among them.

        Exclusive mode stays (lifting it would show every other tool).
        """
        kept = set(names)
        unfolded = {
            facade: tuple(name for name in children if name in kept)
            for facade, children in self.unfolded.items()
            if facade in kept
        }
        return replace(self, unfolded=unfolded, hits=tuple(name for name in self.hits if name in kept))

    def naming_only(
        self, names: Iterable[str], *, groups: Iterable[str], agentic: Iterable[str], chained: Iterable[str]
    ) -> "DisclosureState":
        """The state as people read it: ``keeping``'s cut, and its other fields naming only ``names`` too.

        The exclusive facade reads as none, the tools last shown and a playbook's done tools keep ``names``, and
        only the ``groups`` among the active ones, the ``agentic`` entries and the ``chained`` objects stay.
        """
        kept, shown_groups = set(names), set(groups)
        done = self.done_among(kept).agentic
        return replace(
            self.keeping(kept),
            active_groups=None
            if self.active_groups is None
            else tuple(name for name in self.active_groups if name in shown_groups),
            exclusive=self.exclusive if self.exclusive in kept else "",
            visible=tuple(name for name in self.visible if name in kept),
            agentic={key: done[key] for key in agentic if key in done},
            chained={key: self.chained[key] for key in chained if key in self.chained},
        )

    def done_among(self, names: Iterable[str]) -> "DisclosureState":
        """The state with each playbook's done tools cut to ``names`` (``done_among``)."""
        return replace(self, agentic=done_among(self.agentic, names))

    def with_visible(self, names: list[str]) -> "DisclosureState":
        return replace(self, visible=_names(names))
