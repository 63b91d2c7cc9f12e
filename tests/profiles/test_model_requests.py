"""What the official ``openai`` SDK sends for an agent: notes placed per provider, tool choice, sampling, profiles."""

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User

from agents_app.models import AgentRun, RunStatus
from agents_app.models_adapters.notes import NOTE_PREFIX, messages_for_model
from agents_app.services import RunInputError, run_start
from tests.profiles.conftest import MakeAgent
from tests.profiles.sample_tools import book_stay
from tests.sagas.sample_tools import LOG, TOOLS
from tests.unit.fake_openai import FakeModel, completion
from toolhub.catalogue import tool_catalogue_sync
from toolhub.models import ToolDefinition
from toolhub.tools.profiles import profile_problems
from toolhub.tools.registry import registry

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _saga_tools(settings: Any) -> Iterator[None]:
    settings.TOOLHUB = {**settings.TOOLHUB, "SAGA_MAX_ATTEMPTS": 2, "SAGA_RETRY_BASE_SECONDS": 0.0}
    LOG.clear()
    with registry.temporarily(*TOOLS, book_stay):
        yield


def _start(agent: Any, user: User, text: str = "go") -> AgentRun:
    run = run_start(agent=agent, user=user, input=text)
    run.refresh_from_db()
    return run


def _trip_that_fails(fake_model: FakeModel) -> None:
    fake_model.queue(
        completion(tool_calls=[{"id": "c1", "name": "book", "arguments": '{"item": "flight"}'}]),
        completion(tool_calls=[{"id": "c2", "name": "explode", "arguments": '{"reason": "card declined"}'}]),
        completion(content="Sorry, nothing was booked."),
    )


@pytest.mark.parametrize("placement", ["tool_result", "user", "system"])
def test_a_rollback_note_goes_where_the_provider_says(
    placement: str, fake_model: FakeModel, openai_agent: MakeAgent, alice: User
) -> None:
    # given an agent that compensates on error, on a provider with this note placement
    _trip_that_fails(fake_model)
    agent = openai_agent(
        provider={"note_placement": placement},
        system_prompt="Book trips.",
        tools=["book", "explode"],
        compensate_on_error=True,
    )

    # when the second step fails and the first is rolled back
    run = _start(agent, alice)

    # then the run records the note where it happened
    assert run.status == RunStatus.COMPLETED, run.error
    assert [m["role"] for m in run.messages][-3:] == ["tool", "system", "assistant"]
    note = run.messages[-2]["content"]
    assert note.startswith('Step explode({"reason":"card declined"}) failed') and "rolled back" in note

    # and the model was sent it per the provider: never as a system message after the tool results
    sent = fake_model.requests[-1]["body"]["messages"]
    roles = [m["role"] for m in sent]
    assert "system" not in roles[1:]
    if placement == "tool_result":
        assert roles == ["system", "user", "assistant", "tool", "assistant", "tool"]
        assert sent[-1]["tool_call_id"] == "c2" and sent[-1]["content"].endswith("\n\n" + note)
        assert sent[0] == {"role": "system", "content": "Book trips."}
    elif placement == "user":
        assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "user"]
        assert sent[-1] == {"role": "user", "content": NOTE_PREFIX + note}
    else:
        assert roles == ["system", "user", "assistant", "tool", "assistant", "tool"]
        assert sent[0] == {"role": "system", "content": "Book trips.\n\n" + note}


def test_notes_without_a_tool_result_before_them_become_user_notes() -> None:
    stored = [
        {"role": "system", "content": "Prompt."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "done"},
        {"role": "system", "content": "Rolled back at the request of user:alice."},
    ]

    assert messages_for_model(stored, "tool_result")[-1] == {
        "role": "user",
        "content": NOTE_PREFIX + "Rolled back at the request of user:alice.",
    }
    assert messages_for_model(stored[1:], "system")[0] == {
        "role": "system",
        "content": "Rolled back at the request of user:alice.",
    }
    assert stored[-1]["role"] == "system"  # the record is not changed
    with pytest.raises(ValueError, match="Unknown note placement 'footer'; use tool_result, user or system"):
        messages_for_model(stored, "footer")


def test_tool_choice_temperature_and_max_tokens_are_sent(
    fake_model: FakeModel, openai_agent: MakeAgent, alice: User
) -> None:
    fake_model.queue(completion(content="ok"), completion(content="ok"), completion(content="ok"))
    named = openai_agent(name="named", tools=["book", "explode"], tool_choice="book", temperature=0.2, max_tokens=256)
    required = openai_agent(name="required", tools=["book"], tool_choice="required")
    plain = openai_agent(name="plain", tools=["book"])

    for agent in (named, required, plain):
        assert _start(agent, alice).status == RunStatus.COMPLETED

    first, second, third = (r["body"] for r in fake_model.requests)
    assert first["tool_choice"] == {"type": "function", "function": {"name": "book"}}
    assert (first["temperature"], first["max_tokens"]) == (0.2, 256)
    assert second["tool_choice"] == "required" and "temperature" not in second and "max_tokens" not in second
    assert not {"tool_choice", "temperature", "max_tokens"} & set(third)


def test_a_named_tool_choice_the_run_may_not_call_now_is_not_sent(
    fake_model: FakeModel, openai_agent: MakeAgent, alice: User
) -> None:
    fake_model.queue(completion(content="ok"))
    agent = openai_agent(tools=["book", "explode"], tool_choice="explode")
    tool_catalogue_sync()
    assert ToolDefinition.objects.filter(name="explode").update(enabled=False) == 1  # an operator switched it off

    run = _start(agent, alice)

    assert run.status == RunStatus.COMPLETED
    body = fake_model.requests[0]["body"]
    assert [t["function"]["name"] for t in body["tools"]] == ["book"]
    assert "tool_choice" not in body  # naming a tool the request does not carry would be refused by the server


def test_bad_sampling_settings_are_refused_with_a_reason(openai_agent: MakeAgent) -> None:
    with pytest.raises(RunInputError, match="tool_choice must be empty, auto, required, none, or the name of one"):
        openai_agent(tools=["book"], tool_choice="explode")
    with pytest.raises(RunInputError, match="temperature must be between 0 and 2, not 3.5"):
        openai_agent(tools=["book"], temperature=3.5)
    with pytest.raises(RunInputError, match="max_tokens must be between 1 and 1000000, not 0"):
        openai_agent(tools=["book"], max_tokens=0)


@pytest.mark.parametrize(
    ("profile", "expected"),
    [("", "openai"), ("compact", "compact"), ("gemini", "gemini"), ("openai-strict", "openai-strict")],
)
def test_tools_are_sent_in_the_providers_schema_profile(
    profile: str, expected: str, fake_model: FakeModel, openai_agent: MakeAgent, alice: User
) -> None:
    fake_model.queue(completion(content="ok"))
    agent = openai_agent(provider={"schema_profile": profile}, tools=["book_stay"])

    assert agent.provider.effective_schema_profile == expected
    assert _start(agent, alice).status == RunStatus.COMPLETED
    [sent] = fake_model.requests[0]["body"]["tools"]
    parameters = sent["function"]["parameters"]
    assert profile_problems(parameters, expected) == []
    assert parameters["properties"]["amount"]["pattern"] == r"^\d{1,6}(\.\d{1,2})?$"
    assert "$defs" not in repr(parameters)
    if expected == "compact":
        assert "anyOf" not in repr(parameters)
    if expected == "gemini":
        assert parameters["properties"]["note"] == {"type": "string", "nullable": True}
