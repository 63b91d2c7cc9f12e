"""OpenAI-compatible Chat Completions through the official SDK (OpenAI, Ollama, vLLM, LM Studio...)."""

import dataclasses
import functools
import json
import logging
import os
import threading
from collections.abc import Callable
from typing import Any

import openai

from agents_app.models_adapters.base import (
    ModelToolCall,
    ModelTurn,
    PartialSink,
    answer_characters,
    finished_turn,
    reasoning_texts,
    refusal_text,
    reported_or_estimated,
)
from agents_app.models_adapters.notes import messages_for_model
from agents_app.models_adapters.streaming import StreamedTurn
from toolhub.conf import toolhub_settings
from toolhub.deadlines import DeadlineExceeded, run_within, shut
from toolhub.exceptions import ModelError
from toolhub.outbound_addresses import guarded_client, outbound_refusal
from toolhub.tools.secrets import SecretScrubber
from toolhub.wire import WIRE_BYTES_PER_ANSWER_BYTE, WireBoundExceeded, bounded_responses

logger = logging.getLogger(__name__)

#: Where a provider with no base URL goes: OpenAI's endpoint, as its kind says (never ``OPENAI_BASE_URL``).
OPENAI_BASE_URL = "https://api.openai.com/v1"


class ClientSockets:
    """The sockets one client opened, shut (``deadlines.shut``) when its call is given up.

    ``OpenAI.close()`` closes them only, which leaves a helper blocked reading the answer waiting for the endpoint's
    next byte (the connection open, the endpoint answering on). Each connection's socket is learnt from httpx's
    ``trace`` request extension; one still opening when the call is given up is shut as soon as it is open.
    """

    def __init__(self) -> None:
        self._streams: list[Any] = []
        self._lock = threading.Lock()
        self._shut = False

    def hooks(self) -> dict[str, list[Callable[[Any], None]]]:
        """``event_hooks`` (request) that have every request of the client report the connections it opens."""

        def traced(request: Any) -> None:
            request.extensions["trace"] = self._trace

        return {"request": [traced]}

    def shut(self) -> None:
        """Shut every socket the client opened, and any it opens from now on."""
        with self._lock:
            self._shut = True
            streams = list(self._streams)
        for stream in streams:
            shut(stream.get_extra_info("socket"))

    def _trace(self, event: str, info: dict[str, Any]) -> None:
        if event not in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            return
        stream = info.get("return_value")
        if stream is None:
            return
        with self._lock:
            self._streams.append(stream)
            given_up = self._shut
        if given_up:
            shut(stream.get_extra_info("socket"))


def provider_client(
    *, base_url: str | None, api_key: str, timeout: float, max_bytes: int, sockets: ClientSockets | None = None
) -> openai.OpenAI:
    """The SDK's client for one provider, sending only what the provider's row names, and only to its endpoint.

    The SDK reads ``OPENAI_BASE_URL``, ``OPENAI_ORG_ID``, ``OPENAI_PROJECT_ID`` and ``OPENAI_CUSTOM_HEADERS`` from
    the process environment by itself and applies them to every client (an ``Authorization`` listed in the last one
    even replaces the key given): the workers' environment is the platform's, shared by every provider, so each is
    set here or left out. Redirects are not followed (the SDK's default follows any, re-sending a 307's body to
    whatever host ``Location`` names and reading its answer as the model's): a redirect fails the turn. Every
    answer's body is cut at ``max_bytes`` read (``wire``), whatever it holds. Each connection goes only to an address
    the outbound policy allows (``toolhub.outbound_addresses``).
    """
    key = api_key or "not-needed"  # Local servers (Ollama, vLLM, LM Studio) accept any key; the SDK insists on one.
    listed = (line.split(":", 1)[0].strip() for line in os.environ.get("OPENAI_CUSTOM_HEADERS", "").split("\n"))
    left_out: dict[str, Any] = {name: openai.Omit() for name in listed if name and name.lower() != "authorization"}
    headers = {
        **left_out,
        "OpenAI-Organization": openai.Omit(),
        "OpenAI-Project": openai.Omit(),
        "Authorization": f"Bearer {key}",
    }
    return openai.OpenAI(
        base_url=base_url or OPENAI_BASE_URL,
        api_key=key,
        timeout=timeout,
        max_retries=1,
        default_headers=headers,
        http_client=guarded_client(
            openai.DefaultHttpxClient(
                follow_redirects=False,
                event_hooks={**bounded_responses(max_bytes), **(sockets.hooks() if sockets is not None else {})},
            )
        ),
    )


class OpenAIChatAdapter:
    """Calls ``chat.completions.create`` with the tools as functions, cut off at the provider's deadline.

    The SDK's timeout bounds each wait for bytes, not the whole call: an endpoint that drips its
    answer a byte at a time never trips it. So the call runs on a helper thread and the step gives
    up on it at ``deadline`` seconds, closing its connection (the step token makes sure a late answer
    could not be recorded anyway).

    Notes for the model are placed per ``note_placement`` (``notes.messages_for_model``); the agent's
    ``tool_choice``, ``temperature`` and ``max_tokens`` are sent when set, else the server decides.

    With ``stream``, the answer is streamed (``stream=True``, usage asked for in the last chunk) and the
    waiting thread hands the text so far to ``on_partial`` at most every ``flush_seconds``; a stream that
    breaks before the model finished fails the turn (``StreamedTurn.turn``).
    """

    #: A network call that may take up to the provider's deadline: asked outside any transaction.
    answers_in_process = False

    def __init__(
        self,
        *,
        provider_name: str,
        base_url: str | None,
        model: str,
        api_key: str,
        parallel_tool_calls: bool = True,
        request_timeout: float = 30.0,
        deadline: float = 120.0,
        note_placement: str = "tool_result",
        tool_choice: str = "",
        temperature: float | None = None,
        max_tokens: int | None = None,
        stream: bool = False,
        flush_seconds: float = 0.5,
    ) -> None:
        self._provider_name = provider_name
        self._deadline = deadline
        # An endpoint that repeats its key (a debugging proxy, a misconfigured gateway) must not get it stored in
        # the run or sent to a tool as an argument: every answer is scrubbed of it, as remote MCP answers are.
        self._key = SecretScrubber([api_key])
        self._sockets = ClientSockets()
        self._client = provider_client(
            base_url=base_url,
            api_key=api_key,
            timeout=min(request_timeout, deadline),
            max_bytes=toolhub_settings().MAX_EXTERNAL_RESULT_BYTES * WIRE_BYTES_PER_ANSWER_BYTE,
            sockets=self._sockets,
        )
        self._model = model
        self._parallel_tool_calls = parallel_tool_calls
        self._note_placement = note_placement
        self._tool_choice = tool_choice
        self._temperature = temperature
        self._max_tokens = max_tokens
        self._stream = stream
        self._flush_seconds = flush_seconds

    def complete(
        self, *, messages: list[dict[str, Any]], tools: list[dict[str, Any]], on_partial: PartialSink | None = None
    ) -> ModelTurn:
        options: dict[str, Any] = {"model": self._model, "messages": messages_for_model(messages, self._note_placement)}
        if tools:
            options["tools"] = tools
            if not self._parallel_tool_calls:
                options["parallel_tool_calls"] = False
            choice = self._tool_choice_for(tools)
            if choice is not None:
                options["tool_choice"] = choice
        if self._temperature is not None:
            options["temperature"] = self._temperature
        if self._max_tokens is not None:
            options["max_tokens"] = self._max_tokens
        prompt_characters = _length_of([options["messages"], tools])  # read only if the endpoint gives no usage
        if self._stream:
            streamed = StreamedTurn(
                max_bytes=toolhub_settings().MAX_EXTERNAL_RESULT_BYTES, prompt_characters=prompt_characters
            )
            options.update(stream=True, stream_options={"include_usage": True})
            partial = (lambda text: on_partial(self._key.text(text))) if on_partial is not None else None
            self._within_deadline(
                lambda: _consume(self._client.chat.completions.create(**options), streamed), streamed, partial
            )
            return self._scrubbed(streamed.turn())
        response = self._within_deadline(lambda: self._client.chat.completions.create(**options))
        return self._scrubbed(_turn_from(response, prompt_characters))

    def _scrubbed(self, turn: ModelTurn) -> ModelTurn:
        """The turn without the provider's key, wherever the endpoint put it (text, tool names, arguments)."""
        if not self._key:
            return turn
        calls = tuple(
            ModelToolCall(id=self._key.text(c.id), name=self._key.text(c.name), arguments=self._key.text(c.arguments))
            for c in turn.tool_calls
        )
        return dataclasses.replace(
            turn, content=self._key.text(turn.content), tool_calls=calls, extra=self._key.value(turn.extra)
        )

    def _tool_choice_for(self, tools: list[dict[str, Any]]) -> Any:
        """The ``tool_choice`` to send: a mode, or a named tool if the run may call it now (else none)."""
        if not self._tool_choice or self._tool_choice in ("auto", "required", "none"):
            return self._tool_choice or None
        if any(t.get("function", {}).get("name") == self._tool_choice for t in tools):
            return {"type": "function", "function": {"name": self._tool_choice}}
        logger.warning("tool_choice %s is not among the tools this run may call now; not sent", self._tool_choice)
        return None

    def _within_deadline(
        self,
        request: Callable[[], Any],
        streamed: StreamedTurn | None = None,
        on_partial: PartialSink | None = None,
    ) -> Any:
        """Run ``request`` on a helper thread; give up at the deadline (closing the client); pass on a stream's text."""
        shown = ""

        def pass_on() -> None:
            nonlocal shown
            if streamed is not None and on_partial is not None and (text := streamed.text()) != shown:
                on_partial(text)
                shown = text

        try:
            return run_within(
                functools.partial(_as_model_error, request),
                seconds=self._deadline,
                name=f"model-call-{self._provider_name}",
                cut=self._cut,
                tick=pass_on,
                every=self._flush_seconds,
            )
        except DeadlineExceeded:
            late = (
                f"Model provider {self._provider_name!r} did not answer within its deadline of "
                f"{self._deadline:g} s; retry the run later."
            )
            # A stream given up still cost what the endpoint produced of it: charged as read.
            raise (streamed.refused(late) if streamed is not None else ModelError(late)) from None

    def _cut(self) -> None:
        """End the call given up: its sockets shut (a blocked read ends at once), the client closed."""
        self._sockets.shut()
        self._client.close()


def _as_model_error(request: Callable[[], Any]) -> Any:
    """``request()``; the SDK's errors as ``ModelError`` with a message fit for the run (the cause kept)."""
    try:
        return request()
    except WireBoundExceeded as error:  # a whole answer too big to read (a stream's is refused as read)
        raise ModelError(str(error)) from error
    except openai.APIConnectionError as error:
        if refused := outbound_refusal(error):
            raise ModelError(f"Model endpoint not contacted: {refused}") from error
        raise ModelError(f"Model endpoint unreachable: {error.__class__.__name__}") from error
    except openai.APIStatusError as error:
        if 300 <= error.status_code < 400:
            raise ModelError(
                f"Model endpoint answered HTTP {error.status_code}, a redirect, which is not followed; an "
                "administrator must give the provider the endpoint's own URL."
            ) from error
        raise ModelError(f"Model endpoint answered HTTP {error.status_code}") from error
    except openai.APIError as error:
        raise ModelError(
            f"Model endpoint answered something that is not a chat completion ({error.__class__.__name__})"
        ) from error


def _consume(stream: Any, streamed: StreamedTurn) -> None:
    """Read the SDK's stream to its end into ``streamed``; one given up midway is charged as read.

    ``create`` answered already (its HTTP status errors are raised there), so whatever fails while reading is the
    stream breaking off after the endpoint produced part of the answer: an error event (the SDK's ``APIError``),
    the transport (the SDK's ``APIConnectionError``, or the transport's own error), an event that is not JSON. Each
    is charged what was read (``RefusedTurn``), as the answer given up at its size bound already is. The endpoint's
    own words are not repeated: an error event's text is the endpoint's to fill (an upstream key, a URL).
    """
    try:
        with stream:
            for chunk in stream:
                streamed.add(chunk)
    except ModelError:  # ``StreamedTurn``'s refusal of an answer past its bound: a ``RefusedTurn`` already
        raise
    except WireBoundExceeded as exc:  # past the bound on bytes read, whatever they held: charged as read
        raise streamed.refused(str(exc)) from exc
    except Exception as exc:  # noqa: BLE001 - any failure while reading is the stream broken off
        raise streamed.refused(
            f"The model's streamed answer broke off ({exc.__class__.__name__}); retry the run."
        ) from exc


def _length_of(request: Any) -> Callable[[], int]:
    """The request's length in characters as JSON, worked out once and only when asked for."""
    return functools.cache(lambda: len(json.dumps(request, ensure_ascii=False, default=str)))


def _turn_from(response: Any, prompt_characters: Callable[[], int]) -> ModelTurn:
    """The response's first choice as a turn; usage the endpoint left out is estimated from the texts' lengths.

    The texts the model wrote, its reasoning included (``reasoning_texts``), though only the answer is kept.
    """
    try:
        choice = response.choices[0]
        message = choice.message
        calls = tuple(
            ModelToolCall(
                id=call.id or f"call_{index}",
                name=call.function.name or "",
                arguments=call.function.arguments or "",
            )
            for index, call in enumerate(message.tool_calls or ())
        )
        usage = getattr(response, "usage", None)
        content = (message.content or "") + refusal_text(message)  # as a stream's deltas are read: both, in order
        written = answer_characters(content, calls) + sum(map(len, reasoning_texts(message)))
        turn = ModelTurn(
            content=content,
            tool_calls=calls,
            prompt_tokens=reported_or_estimated(usage, "prompt_tokens", prompt_characters),
            completion_tokens=reported_or_estimated(usage, "completion_tokens", written),
        )
    except (AttributeError, IndexError, TypeError, ValueError) as exc:
        raise ModelError("Model endpoint answered something that is not a chat completion") from exc
    return finished_turn(getattr(choice, "finish_reason", None), turn)
