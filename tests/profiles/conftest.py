"""Fixtures of the profile tests: a fake OpenAI-compatible endpoint and agents on providers pointing at it."""

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agents_app.models import Agent, ModelProvider, ProviderKind
from agents_app.services import agent_create
from tests.unit.fake_openai import FakeModel, serve

MakeAgent = Callable[..., Agent]


@pytest.fixture
def fake_model() -> Iterator[FakeModel]:
    with serve(FakeModel()) as model:
        yield model


@pytest.fixture
def openai_agent(fake_model: FakeModel) -> MakeAgent:
    """An agent on a provider (of the fake endpoint) with the given provider settings and agent options."""

    def make(*, provider: dict[str, Any] | None = None, **options: Any) -> Agent:
        row = ModelProvider.objects.create(
            name=f"fake-{ModelProvider.objects.count()}",
            kind=ProviderKind.OPENAI,
            base_url=fake_model.base_url,
            model_name="test-model",
            **(provider or {}),
        )
        return agent_create(name=options.pop("name", "gpt"), provider=row.name, **options)

    return make
