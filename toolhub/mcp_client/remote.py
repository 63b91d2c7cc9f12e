"""Talking to a remote MCP server with the official ``mcp`` SDK client (streamable HTTP).

Each use opens one session: toolhub never holds a connection between calls, so a worker that
restarts, or a server that is down at startup, changes nothing until the next use.
"""

import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

import anyio
import httpx2
from jsonschema.exceptions import ValidationError as SchemaViolation
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from toolhub.conf import toolhub_settings
from toolhub.exceptions import ToolDefinitionError, ToolError
from toolhub.outbound_addresses import guarded_client
from toolhub.storable import storable_text, storable_value
from toolhub.tools.jsonschema_args import check_schema_bounds, schema_problems
from toolhub.tools.linear_patterns import linear_validator
from toolhub.tools.validation_budget import MAX_VALIDATION_STEPS, ValidationBudgetSpent, validation_budget
from toolhub.wire import WIRE_BYTES_PER_ANSWER_BYTE, bounded_async_responses

__all__ = ["RemoteCallOutcome", "RemoteServerError", "remote_call", "remote_tools"]

logger = logging.getLogger(__name__)


class RemoteServerError(ToolError):
    """The remote server could not be reached or refused the request.

    The message names the server by its name, never its URL: the URL is platform configuration (many
    hosted servers carry a shared secret in it), and the message reaches the call's user, the model and
    the audit trail. The URL and the detail go to the server log.
    """


@dataclass(frozen=True)
class RemoteCallOutcome:
    """What a call found: the tool's definition as listed right before the call, and its result (if called)."""

    listed: dict[str, Any] | None
    text: str = ""
    structured: Any = None
    is_error: bool = False
    #: The listing held the tool's name more than once: nothing was called (see ``remote_call``).
    listed_twice: bool = False
    #: The listing had more than ``MAX_LISTING_PAGES`` pages: nothing was called.
    listing_too_long: bool = False


#: A server still paging after this many pages is refused whole, never read in part: a listing cut short would
#: read the tools on its later pages as gone (a sync marks them removed, a call finds its tool unlisted).
MAX_LISTING_PAGES = 100


def _listing_too_long(name: str) -> RemoteServerError:
    return RemoteServerError(
        f"The MCP server {name!r} listed more than {MAX_LISTING_PAGES} pages of tools without an end; nothing was "
        "changed or called. The server must end its listing (a last page without nextCursor) within "
        f"{MAX_LISTING_PAGES} pages."
    )


def remote_tools(url: str, *, name: str, headers: Mapping[str, str], timeout: float) -> list[dict[str, Any]]:
    """Every tool the server lists, as wire-format dicts (``inputSchema``, ``annotations``)."""

    async def main(client: Client) -> list[dict[str, Any]] | None:
        return await _listed(client)

    listed: list[dict[str, Any]] | None = _run(url, name, headers, timeout, main)
    if listed is None:
        raise _listing_too_long(name)
    return listed


def remote_call(
    url: str,
    *,
    name: str,
    headers: Mapping[str, str],
    timeout: float,
    remote_name: str,
    arguments: Mapping[str, Any],
    meta: Mapping[str, Any],
    accepted_hash: str,
    kept: Callable[[Any], Any] = lambda definition: definition,
) -> RemoteCallOutcome:
    """List the tools, and call ``remote_name`` only if its definition still hashes to ``accepted_hash``.

    And only if the listing names it once (``RemoteServerError`` otherwise): the result is checked against the
    output schema of the entry hashed, never another of the same name.

    ``kept``: the definition as toolhub keeps and hashes it (without the credential); ``listed`` is so.
    """
    from toolhub.mcp_client.definitions import definition_hash

    async def main(client: Client) -> RemoteCallOutcome:
        listing = await _listed(client)
        if listing is None:
            return RemoteCallOutcome(listed=None, listing_too_long=True)
        named = [tool for tool in listing if tool.get("name") == remote_name]
        if len(named) > 1:
            return RemoteCallOutcome(listed=None, listed_twice=True)
        listed = kept(named[0]) if named else None
        if listed is None or definition_hash(listed) != accepted_hash:
            return RemoteCallOutcome(listed=listed)
        result = await client.call_tool(remote_name, dict(arguments), meta=dict(meta) or None)
        text = "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")
        return RemoteCallOutcome(
            listed=listed, text=text, structured=result.structured_content, is_error=bool(result.is_error)
        )

    outcome: RemoteCallOutcome = _run(url, name, headers, timeout, main)
    if outcome.listing_too_long:
        raise _listing_too_long(name)
    if outcome.listed_twice:
        # The pin is compared with one entry, while the SDK checks the result against the output schema of the
        # last entry of that name it read: a second entry (no ``outputSchema``) would let any result through.
        raise RemoteServerError(
            f"The MCP server {name!r} lists the tool {remote_name!r} more than once, so which definition it "
            "would run is not the one accepted; nothing was sent. The server must list each tool once."
        )
    return outcome


async def _listed(client: Client) -> list[dict[str, Any]] | None:
    """Every tool listed, page after page; ``None`` when the listing has not ended after ``MAX_LISTING_PAGES``."""
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(MAX_LISTING_PAGES):
        page = await client.list_tools(cursor=cursor, cache_mode="bypass")
        # Kept as listed, but storable: a NUL in one description must not stop the fetch or the quarantine.
        tools.extend(
            storable_value(tool.model_dump(mode="json", by_alias=True, exclude_none=True)) for tool in page.tools
        )
        cursor = page.next_cursor
        if not cursor:
            return tools
    return None


def _run(url: str, name: str, headers: Mapping[str, str], timeout: float, body: Any) -> Any:
    limit = toolhub_settings().MAX_EXTERNAL_RESULT_BYTES * WIRE_BYTES_PER_ANSWER_BYTE

    async def main() -> Any:
        with anyio.fail_after(timeout):
            # Every connection (a redirect's too) only to an address the outbound policy allows.
            async with guarded_client(create_mcp_http_client(headers=dict(headers))) as http:
                # This use's answers together cut at the bytes read (``toolhub.wire``), before they are parsed.
                http.event_hooks = bounded_async_responses(limit)
                async with Client(streamable_http_client(url, http_client=http)) as client:
                    _check_outputs_in_linear_time(client.session)
                    return await body(client)

    server = f"The MCP server {name!r}"
    try:
        return anyio.run(main)
    except TimeoutError:
        raise RemoteServerError(f"{server} did not answer within {timeout:g} s.") from None
    except (httpx2.HTTPError, OSError) as exc:
        with _log_scope(headers, url):
            logger.warning("MCP server %r at %s could not be reached: %r", name, url, exc)
        raise RemoteServerError(f"{server} could not be reached: {type(exc).__name__}.") from None
    except ExceptionGroup as group:
        first = _innermost(group)
        with _log_scope(headers, url):
            logger.warning("MCP server %r at %s failed: %r", name, url, first)
        # What the server said, with its address taken out wherever a library quoted it; not cut here:
        # whoever shows it scrubs the credential first (a cut credential is not recognisable).
        said = storable_text(str(first).replace(url, f"<{name}>").replace(url.split("?", 1)[0], f"<{name}>"))
        raise RemoteServerError(f"{server} failed: {type(first).__name__}: {said}") from None


def _check_outputs_in_linear_time(session: ClientSession) -> None:
    """Check a tool's structured result against its listed ``outputSchema`` with patterns matched in linear time.

    The SDK checks it with jsonschema, whose ``pattern`` runs on Python's backtracking ``re``: the server chooses
    both the schema and the result (``^(a+)+$`` and thirty ``a`` then ``!`` hold the worker and its GIL for
    minutes, past any timeout). The same checks, cached per tool as the SDK does, on ``linear_validator``.

    The schema is first held to the bounds of an input schema (``check_schema_bounds``): an output schema is pinned
    when its tool is accepted, but this runs before the pin is compared (the SDK checks each result against what
    the session listed), and one looping through ``$ref`` (``RecursionError``), fanning out to 2**n checks or
    holding fifty large patterns would otherwise reach the worker with each result.
    """

    def output_validator(name: str, output_schema: dict[str, Any]) -> Any:
        if (validator := session._tool_output_validators.get(name)) is not None:
            return validator
        try:
            check_schema_bounds(f"Tool {name!r}: the output schema", output_schema)
        except ToolDefinitionError as exc:
            raise RuntimeError(f"Invalid schema for tool {name}: {exc}") from None
        validator = _Budgeted(linear_validator(output_schema))  # an empty registry: nothing fetched
        session._tool_output_validators[name] = validator
        return validator

    session._output_schema_validator = output_validator  # type: ignore[method-assign]


class _Budgeted:
    """A result's check within one ``validation_budget``: the SDK iterates its errors, lazily, in the worker.

    A failed check is one error saying where and which rule failed, never the value: the SDK quotes its error
    whole (``str``: the offending value and the whole result), and the refusal reaches the model and the audit
    trail, carrying the very text the accepted output schema keeps out.
    """

    def __init__(self, validator: Any) -> None:
        self.validator = validator

    def iter_errors(self, instance: Any) -> Iterator[Any]:
        try:
            with validation_budget():
                errors = list(self.validator.iter_errors(instance))
        except ValidationBudgetSpent:
            return iter([SchemaViolation(f"checking the result took more than {MAX_VALIDATION_STEPS:,} steps")])
        if not errors:
            return iter(())
        reported, unreported = schema_problems(errors)
        said = "; ".join(f"{'/'.join(map(str, loc)) or '(root)'}: {message}" for loc, message in reported)
        more = f"; and {unreported:,} more" if unreported else ""
        return iter([SchemaViolation(f"the result does not satisfy the accepted output schema: {said}{more}")])

    def is_valid(self, instance: Any) -> bool:
        return next(self.iter_errors(instance), None) is None

    def __getattr__(self, name: str) -> Any:  # the rest of a validator (its schema...); the SDK checks with iter_errors
        return getattr(self.validator, name)


def _log_scope(headers: Mapping[str, str], url: str) -> AbstractContextManager[Any]:
    """Log lines written in it hold neither the credential nor the URL's secret parts (the URL itself stays).

    A server's error may repeat what it was sent (an auth layer's "credential Bearer <token> may not read
    ..."), and no call's log scope knows the credential: the tool's presets do not hold it.
    """
    from toolhub.mcp_client.services import credential_scrubber  # services calls this module

    return credential_scrubber(headers, url, whole_url=False).scope()


def _innermost(error: BaseException) -> BaseException:
    """The first error inside (nested) exception groups: what actually went wrong."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error
