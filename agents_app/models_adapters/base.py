"""The interface every model adapter implements, and the choice of adapter for an agent."""

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from toolhub.conf import toolhub_settings
from toolhub.exceptions import ModelError

if TYPE_CHECKING:
    from agents_app.models import Agent

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelToolCall:
    """A tool call as the model asked for it; ``arguments`` is the raw text it sent (maybe not JSON).

    Checked when built: an SDK builds its answer without checking field types, so an endpoint's ``arguments``
    object or numeric ``id`` would reach the loop as it came (and break the step outside the adapter).
    """

    id: str
    name: str
    arguments: str

    def __post_init__(self) -> None:
        for name in ("id", "name", "arguments"):
            _require(isinstance(getattr(self, name), str), f"a tool call's {name} is not text")


@dataclass(frozen=True)
class ModelTurn:
    """One answer of the model: text, tool calls, or both, plus token usage; checked when built, as its calls are."""

    content: str = ""
    tool_calls: tuple[ModelToolCall, ...] = ()
    prompt_tokens: int = 0
    completion_tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _require(isinstance(self.content, str), "its content is not text")
        _require(all(isinstance(call, ModelToolCall) for call in self.tool_calls), "a tool call is not one")
        for name in ("prompt_tokens", "completion_tokens"):
            count = getattr(self, name)
            _require(type(count) is int and count >= 0, f"its {name} is not a count")


def token_count(usage: Any, name: str) -> int | None:
    """A usage field as a count: absent or null is 0, a number or numeric text as its whole part.

    One that is no count (``Infinity``, NaN, other text, a list, a boolean, negative) is the endpoint's garbage:
    ``None``, which ``reported_or_estimated`` takes for "not counted" (never an ``OverflowError`` with a traceback).
    """
    value = getattr(usage, name, 0)
    if isinstance(value, bool):
        return None
    try:
        count = int(value or 0)
    except (OverflowError, TypeError, ValueError):
        return None
    return count if count >= 0 else None


#: Characters a token is taken to hold when an endpoint reports no usage (the usual rule of thumb for English).
CHARS_PER_TOKEN = 4


def estimated_tokens(characters: int) -> int:
    """Tokens ``characters`` of text are taken to cost: at least one for any text, rounded up."""
    return -(-characters // CHARS_PER_TOKEN)


def reported_or_estimated(usage: Any, name: str, characters: int | Callable[[], int]) -> int:
    """A usage field as reported, or estimated from the text's length when the endpoint did not count it.

    An endpoint that reports no usage (some self-hosted servers; a stream without its usage chunk) would
    otherwise make every turn free, and a run's or a subagent's ``max_tokens`` budget bound nothing. So would
    one that reports zero for text it read or wrote (a server or proxy that fills the fields without counting):
    no text is zero tokens, so a zero beside text is taken for "not counted" too, and so is garbage (a negative
    count, text, ``Infinity``): refusing the turn for it charged the run nothing for an answer the endpoint gave
    and billed. ``characters`` may be a function: the length is then worked out only when a count is missing (a
    long conversation's, say).
    """
    count = 0 if getattr(usage, name, None) is None else token_count(usage, name)
    if count is None:
        logger.warning("model endpoint reported %s that is no count; estimated from the text's length", name)
    elif count:
        return count
    return estimated_tokens(characters() if callable(characters) else characters)


def answer_characters(content: str, calls: tuple[ModelToolCall, ...]) -> int:
    """The length of what the model wrote in a turn: its text, and each call's id, name and arguments."""
    return len(content) + sum(len(call.id) + len(call.name) + len(call.arguments) for call in calls)


#: Fields in which endpoints send the model's reasoning ("thinking") beside its answer: DeepSeek's and vLLM's
#: ``reasoning_content``, OpenRouter's and Ollama's ``reasoning``.
REASONING_FIELDS = ("reasoning_content", "reasoning")


def reasoning_texts(part: Any) -> list[str]:
    """The reasoning a message or a streamed delta carries (``REASONING_FIELDS``): never kept, as it is no answer.

    The model wrote it all the same and the endpoint billed it: it counts in an answer's estimated usage and
    against a streamed answer's size bound, or an endpoint reporting no usage would charge a long reasoning as the
    few tokens of its answer, and one reasoning without end would be read until the deadline.
    """
    texts = [text for name in REASONING_FIELDS if isinstance(text := getattr(part, name, None), str) and text]
    # The fields are alternatives: an endpoint sending the reasoning in both wrote it once; the longer one counts,
    # so neither a copy nor a shortened second field makes the reasoning cheaper than it was.
    return [max(texts, key=len)] if texts else []


def refusal_text(part: Any) -> str:
    """A message's or a streamed delta's ``refusal``: the text in which the model declined, which is its answer.

    OpenAI sends it instead of ``content`` (null then): read as no text, the run would end answered and empty,
    its user never told that the model declined, nor why. Text only; anything else there is no refusal.
    """
    refusal = getattr(part, "refusal", None)
    return refusal if isinstance(refusal, str) else ""


class RefusedTurn(ModelError):
    """An answer the endpoint gave (and billed) that the run does not use: its usage still counts on the run."""

    def __init__(self, message: str, *, prompt_tokens: int = 0, completion_tokens: int = 0) -> None:
        super().__init__(message)
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens


#: Finish reasons by which the endpoint says the model did not finish its answer, and what that means.
_NOT_FINISHED = {
    "length": "cut off at its token limit (the agent's max_tokens or the model's context); raise the limit or",
    "content_filter": "withheld by the provider's content filter;",
}


def finished_turn(finish_reason: Any, turn: ModelTurn) -> ModelTurn:
    """The turn, unless the endpoint says the model did not finish it: then nothing of it is used, calls included.

    A turn cut off at ``max_tokens`` may hold complete calls of a plan cut short and a half-written text: executing
    the one or ending the run with the other as its answer would act on what the model never finished saying.
    """
    cause = _NOT_FINISHED.get(finish_reason) if isinstance(finish_reason, str) else None
    if cause is None:
        return turn
    raise RefusedTurn(
        f"The model's answer was {cause} retry the run (finish_reason {finish_reason!r}); nothing of it was used.",
        prompt_tokens=turn.prompt_tokens,
        completion_tokens=turn.completion_tokens,
    )


def _require(holds: bool, problem: str) -> None:
    """A turn that is not what adapters promise the loop is the endpoint's garbage: a ``ModelError``."""
    if not holds:
        raise ModelError(f"Model endpoint answered something that is not a chat completion: {problem}.")


#: Receives the model's answer text so far while it streams (at a bounded rate; each call the whole text).
PartialSink = Callable[[str], None]


class ModelAdapter(Protocol):
    """Takes the conversation and the visible tools' definitions, returns the model's next turn.

    With ``on_partial``, an adapter that streams hands it the answer's text so far as it arrives, from
    the calling thread. Raises ``toolhub.exceptions.ModelError`` when the endpoint is unreachable,
    answers garbage, or its stream breaks before the answer is complete.

    ``answers_in_process``: True for an adapter that answers from memory, with no I/O and no wait (the
    scripted model); the loop then takes the whole step in one transaction under the run's lock, with
    no lease. Any other adapter (or one that does not say) is asked outside a transaction, under a lease.
    """

    answers_in_process: bool

    def complete(
        self, *, messages: list[dict[str, Any]], tools: list[dict[str, Any]], on_partial: PartialSink | None = None
    ) -> ModelTurn: ...


def adapter_for(agent: "Agent") -> ModelAdapter:
    """Build the adapter of the agent's model provider.

    Raises ``ModelError`` with a message that names only the provider when it is disabled, bound to
    another tenant than the agent's, or its credential is missing; which environment variable was missing
    goes to the server log only.
    """
    from agents_app.models import ProviderKind
    from toolhub.credential_env import credential_from_env

    provider = agent.provider
    if not provider.enabled:
        logger.warning("model provider %s of agent %s is disabled", provider.name, agent.pk)
        raise ModelError(not_configured_message(provider.name))
    if provider.tenant_id is not None and provider.tenant_id != agent.tenant_id:
        # Checked where the model is built, not only where an agent names it: a provider bound to a tenant
        # since (its endpoint and key are that tenant's) serves no other tenant's agent, nor a global one.
        logger.error("model provider %s is bound to another tenant than agent %s", provider.name, agent.pk)
        raise ModelError(not_configured_message(provider.name))
    if provider.kind == ProviderKind.OPENAI:
        from agents_app.models_adapters.openai_chat import OpenAIChatAdapter

        api_key = credential_from_env(provider.credential_env)
        if provider.credential_env and not api_key:
            logger.error(
                "model provider %s: the environment variable %s that should hold its API key is not set or refused",
                provider.name,
                provider.credential_env,
            )
            raise ModelError(not_configured_message(provider.name))
        if not provider.model_name:
            logger.error("model provider %s has no model name", provider.name)
            raise ModelError(not_configured_message(provider.name))
        return OpenAIChatAdapter(
            provider_name=provider.name,
            base_url=provider.base_url or None,
            model=provider.model_name,
            api_key=api_key,
            parallel_tool_calls=agent.parallel_tool_calls,
            request_timeout=provider.request_timeout_seconds,
            deadline=provider.deadline_seconds,
            note_placement=provider.note_placement,
            tool_choice=agent.tool_choice,
            temperature=agent.temperature,
            max_tokens=agent.max_tokens,
            stream=agent.stream,
            flush_seconds=toolhub_settings().STREAM_FLUSH_SECONDS,
        )
    from agents_app.models_adapters.scripted import ScriptedAdapter

    return ScriptedAdapter(script=agent.script)


def not_configured_message(provider_name: str) -> str:
    """What a run (and its user) is told when a provider cannot be used; never which setting is missing."""
    return f"Model provider {provider_name!r} is not configured; ask an administrator."
