"""ToolContext: an immutable mapping, merged broad to specific (the later one wins)."""

import pytest

from toolhub import ToolContext
from toolhub.tools.context import RESERVED_CONTEXT_KEYS


def test_context_is_a_read_only_mapping() -> None:
    ctx = ToolContext({"tenant": "acme"}, user="alice")

    assert dict(ctx) == {"tenant": "acme", "user": "alice"}
    assert len(ctx) == 2
    assert "tenant" in ctx
    assert ctx["user"] == "alice"
    assert ctx.get("missing") is None


def test_context_cannot_be_changed() -> None:
    ctx = ToolContext(tenant="acme")

    with pytest.raises(TypeError):
        ctx["tenant"] = "globex"  # type: ignore[index]
    with pytest.raises(AttributeError, match="immutable"):
        ctx.tenant = "globex"  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        ctx._values = {}  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        del ctx._values
    assert ctx.tenant == "acme"


def test_context_does_not_follow_the_dict_it_was_built_from() -> None:
    source = {"tenant": "acme"}
    ctx = ToolContext(source)

    source["tenant"] = "globex"

    assert ctx.tenant == "acme"


def test_as_dict_is_a_copy() -> None:
    ctx = ToolContext(tenant="acme")

    copy = ctx.as_dict()
    copy["tenant"] = "globex"

    assert ctx.tenant == "acme"


def test_merged_layers_later_values_on_top() -> None:
    # given a run-level and an interaction-level context
    run = ToolContext(tenant="acme", user="alice", locale="en")
    interaction = ToolContext(locale="fr", correlation_id="c-1")

    # when
    merged = run.merged(interaction)

    # then the interaction wins, and neither input changed
    assert dict(merged) == {"tenant": "acme", "user": "alice", "locale": "fr", "correlation_id": "c-1"}
    assert run["locale"] == "en"
    assert "correlation_id" not in run
    assert run.merged(None) == run
    assert run.merged({}) == run


def test_with_values_returns_a_new_context() -> None:
    ctx = ToolContext(tenant="acme")

    updated = ctx.with_values(call_id="c-1", tenant="globex")

    assert updated.call_id == "c-1" and updated.tenant == "globex"
    assert dict(ctx) == {"tenant": "acme"}


def test_typed_accessors() -> None:
    ctx = ToolContext(tenant="acme", user="alice", user_id=3, run_id="r", loop_id="l", call_id="c", correlation_id="x")

    assert (ctx.tenant, ctx.user, ctx.user_id, ctx.run_id, ctx.loop_id, ctx.call_id, ctx.correlation_id) == (
        "acme",
        "alice",
        3,
        "r",
        "l",
        "c",
        "x",
    )
    assert ToolContext().tenant is None


def test_idempotency_key_defaults_to_the_call_id() -> None:
    assert ToolContext(call_id="c-1").idempotency_key == "c-1"
    assert ToolContext(call_id="c-1", idempotency_key="k-9").idempotency_key == "k-9"
    assert ToolContext().idempotency_key is None


def test_equality_and_hash() -> None:
    assert ToolContext(a=1) == ToolContext({"a": 1})
    assert ToolContext(a=1) == {"a": 1}
    assert ToolContext(a=1) != ToolContext(a=2)
    assert hash(ToolContext(a=1, b=[1])) == hash(ToolContext(b=[1], a=1))


def test_reserved_keys_cover_identity() -> None:
    assert {"tenant", "user", "user_id", "run_id", "call_id", "agent"} <= RESERVED_CONTEXT_KEYS
