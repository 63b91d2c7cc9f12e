"""Fixtures for agentic tools: the sample tools registered, a recording model, agents and runs."""

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agents_app.models import Agent
from agents_app.models_adapters.scripted import ScriptedAdapter
from tests.agentic import sample_tools
from toolhub.tools.registry import registry


@pytest.fixture(autouse=True)
def agentic_tools() -> Iterator[None]:
    sample_tools.RAN.clear()
    with registry.temporarily(*sample_tools.ALL):
        yield


class Recorder:
    """What the run's model was sent on each turn."""

    def __init__(self) -> None:
        self.turns: list[dict[str, Any]] = []

    def names(self, turn: int) -> list[str]:
        return [t["function"]["name"] for t in self.turns[turn]["tools"]]

    def tool(self, turn: int, name: str) -> dict[str, Any]:
        return next(t["function"] for t in self.turns[turn]["tools"] if t["function"]["name"] == name)


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    recorder = Recorder()

    class Recording:
        def __init__(self, agent: Agent) -> None:
            self.inner = ScriptedAdapter(script=agent.script)

        def complete(self, *, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **options: Any) -> Any:
            recorder.turns.append({"tools": tools, "messages": messages})
            return self.inner.complete(messages=messages, tools=tools, **options)

    monkeypatch.setattr("agents_app.loop.adapter_for", Recording)
    return recorder


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def answer(text: str = "done") -> dict[str, Any]:
    return {"content": text}


@pytest.fixture
def make_agent(db: None) -> Callable[..., Agent]:
    from agents_app.services import agent_create

    def make(name: str = "agentic", *, script: list[Any], tools: list[str], **options: Any) -> Agent:
        return agent_create(name=name, provider="scripted", script=script, tools=tools, **options)

    return make


@pytest.fixture
def start_run(db: None, django_capture_on_commit_callbacks: Any) -> Callable[..., Any]:
    """Start a run and let it go as far as it can in-process; return the fresh row."""
    from agents_app.services import run_start

    def start(agent: Agent, user: Any, text: str = "go") -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            run = run_start(agent=agent, user=user, input=text)
        run.refresh_from_db()
        return run

    return start
