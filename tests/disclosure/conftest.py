"""Fixtures for progressive disclosure: sample tools, a recording model, and a small test search provider."""

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agents_app.models import Agent
from agents_app.models_adapters.scripted import ScriptedAdapter
from tests.disclosure import sample_tools
from tests.disclosure.providers import WordProvider
from toolhub.tools.registry import registry


@pytest.fixture(autouse=True)
def disclosure_tools(settings: Any) -> Iterator[None]:
    settings.TOOLHUB = {
        **settings.TOOLHUB,
        "TOOL_SEARCH_PROVIDER": "tests.disclosure.providers.WordProvider",
        "TOOL_PROVIDERS": ["tests.disclosure.conftest.weather_provider", "tests.disclosure.conftest.broken_provider"],
    }
    WordProvider.built = []
    with registry.temporarily(*sample_tools.PLAIN, *sample_tools.FACADES):
        yield


def weather_provider(run: Any, latest_user_message: str) -> list[str]:
    """A tool provider hook: weather tools when the user speaks of weather (and a denied tool, always)."""
    names = ["refund_payment"]
    if "weather" in latest_user_message:
        names.append("get_weather")
    return names


def broken_provider(run: Any, latest_user_message: str) -> list[str]:
    raise RuntimeError("provider down")


class Recorder:
    """What the model was sent on each turn: tool names and the leading system message."""

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
            system = messages[0]["content"] if messages and messages[0].get("role") == "system" else ""
            recorder.turns.append({"tools": tools, "system": system, "messages": messages})
            return self.inner.complete(messages=messages, tools=tools, **options)

    monkeypatch.setattr("agents_app.loop.adapter_for", Recording)
    return recorder


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def answer(text: str = "done") -> dict[str, Any]:
    return {"content": text}


Script = Callable[..., list[dict[str, Any]]]


@pytest.fixture
def make_agent(db: None) -> Callable[..., Agent]:
    """A scripted agent, created through the service (its tools and provider hook are checked)."""
    from agents_app.services import agent_create

    def make(name: str = "discloser", *, script: list[Any], tools: list[str], **options: Any) -> Agent:
        return agent_create(name=name, provider="scripted", script=script, tools=tools, **options)

    return make


@pytest.fixture
def start_run(db: None, django_capture_on_commit_callbacks: Any) -> Callable[..., Any]:
    """Start a run and let it go as far as it can in-process; return the fresh row."""
    from agents_app.services import run_start

    def start(agent: Agent, user: Any, text: str = "go", context: dict[str, Any] | None = None) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            run = run_start(agent=agent, user=user, input=text, context=context)
        run.refresh_from_db()
        return run

    return start
