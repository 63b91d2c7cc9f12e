"""Review 2026-12-06 (ew): the review of reviews ep (pooler chunked reads, role bounds) and et (validation cost
units, the metaschema cache), attacked.

Each finding's test failed on the reviewed code (main at d9460e9) and passes now.

Findings:

1. The metaschema cache (``toolhub.tools.valid_schemas``) keyed a schema by its JSON text, which is not one-to-one
   on the Python values ``check_schema`` judges: a tuple is written as a list, a non-string key as a string, but
   jsonschema's metaschema check calls a tuple no array. A schema refused alone (``items: ({...},)`` in draft 7,
   ``required: ("a",)``) was accepted from the cache once the same schema written with lists had been checked in
   the process: a tool's definition accepted or refused by which tool happened to be built first, and the accepted
   one crashed at its first call (``AttributeError`` out of validation: the tuple is taken for a schema). The
   digest is now kept only for a schema that reads back from its JSON text as itself (plain JSON); any other is
   checked every time, as the module said it was.
2. Review ep's ``connection_chunked_reads`` replaced ``chunked_cursor`` on ``connection_created``, but a connection
   opens inside ``chunked_cursor`` (``_cursor`` -> ``ensure_connection``): when a new connection's first statement is
   a chunked read outside a transaction (a new thread's: each ASGI request thread, a Celery worker's, a command's),
   the call in progress was Django's own and declared its cursor ``WITH HOLD`` behind the pooler, the failure ep
   fixed (its next ``FETCH`` may reach another server connection: "cursor does not exist", and the held cursor stays
   on the first one). ep's test read on a connection opened before. The handler now replaces ``create_cursor``,
   which Django calls once the connection is open, the first time included.

Checked and holding:

- Validation cost units (review et): the largest legitimate arguments that pass, old budget (one step a keyword)
  against the new (100 units a step, reads charged), measured by bisection on both: an array of objects of two
  required properties with ``additionalProperties: false`` 8,332 -> 8,142 items; integers 49,996 -> 49,015; a
  tagged ``oneOf`` of 8 variants 793 -> 781; ``anyOf`` string-or-null 16,665 -> 16,446; strings against a 200-member
  ``enum`` 24,998 -> 24,628; ``uniqueItems`` strings 49,995 -> 48,072; a 5 MB string with ``pattern`` and
  ``maxLength`` passes on both. A 2-4 % narrowing, every case far past what ``MAX_ARGUMENTS_BYTES`` (100 KB) lets
  in: no valid argument within the byte bound is newly refused (pinned below for a 100 KB string and 4,000
  objects). A schema with thousands of optional properties applied to many items now costs its real work (the
  ``properties`` loop walks the schema's names), by design.
- The metaschema cache's key holds the draft class; the format checker is not in it but there is one per draft
  (``_checker``, the same formats each time), so it cannot differ for the same key. A schema changed after it was
  checked gets a new digest (content-addressed: it is checked again). Remote schemas arrive as JSON (plain by
  construction). The dict is guarded by a lock; eviction is oldest-first and only costs a re-check.
- Pooler chunked reads (review ep), after finding 2: the replacement stays on a connection closed and opened again
  (``close_old_connections`` at each request and task), each thread's own connection gets it (Celery worker threads,
  ASGI's per-request threads, ``sync_to_async`` for the async ORM: Django has no async connections). The big readers
  (calls CSV/JSONL ``export_rows``, ``audit_export_lines``, ``verify_audit``'s ``_walk_chain``) all read inside
  ``transaction.atomic`` and keep a streaming server-side cursor behind the pooler (review ep's test): no export is
  read whole into memory. What reads outside one (the look-alike username check, ``_shares_chains``,
  ``sessions_end``) reads one or two columns of a small table. ``StreamedResponse`` takes each chunk on the
  request's thread, where the export's transaction lives.
- ``role_unbounded`` inside an outer atomic: its atomic is a savepoint and PostgreSQL undoes a ``set_config(...,
  true)`` at ``ROLLBACK TO SAVEPOINT`` (review ep's W014 test runs inside the test's transaction and reads
  ``lock_timeout`` back as ``0``).
"""

import threading
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.db import close_old_connections, connection, connections, transaction
from django.test import override_settings
from pydantic import ValidationError

from toolhub.exceptions import ToolDefinitionError
from toolhub.models import ToolCall
from toolhub.tools.definition import Tool
from toolhub.tools.jsonschema_args import validate_against_schema

DRAFT7 = "http://json-schema.org/draft-07/schema#"


def _tool(name: str, schema: dict[str, Any]) -> Tool:
    return Tool.create(name, "Takes values.", schema, lambda arguments, ctx: None, allow_any=True)


@pytest.mark.parametrize(
    ("as_lists", "as_tuples"),
    [
        (
            {"$schema": DRAFT7, "properties": {"tags": {"type": "array", "items": [{"type": "string"}]}}},
            {"$schema": DRAFT7, "properties": {"tags": {"type": "array", "items": ({"type": "string"},)}}},
        ),
        (
            {"properties": {"ew_code": {"type": "string"}}, "required": ["ew_code"]},
            {"properties": {"ew_code": {"type": "string"}}, "required": ("ew_code",)},
        ),
    ],
    ids=["items-tuple", "required-tuple"],
)
def test_a_schema_that_is_not_plain_json_is_not_taken_from_the_cache_of_valid_schemas(
    as_lists: dict[str, Any], as_tuples: dict[str, Any]
) -> None:
    """Found: the cache of schemas found valid keyed a schema by its JSON text, where a tuple reads as a list; the
    metaschema check calls a tuple no array. The schema written with a tuple, refused alone, was accepted once the
    list form had been checked in the process (and crashed at its first call). Expect: refused whatever was built
    before it, as it is alone."""
    with pytest.raises(ToolDefinitionError, match="not valid JSON Schema"):
        _tool("ew_tuples_alone", as_tuples)
    _tool("ew_lists", as_lists)

    with pytest.raises(ToolDefinitionError, match="not valid JSON Schema"):
        _tool("ew_tuples_after", as_tuples)


def test_valid_arguments_within_the_byte_bound_still_pass_the_validation_budget() -> None:
    """Holds: the cost units (review et) refuse no valid argument within ``MAX_ARGUMENTS_BYTES`` (100 KB): a 100 KB
    string with ``pattern`` and ``maxLength``, 4,000 small objects (about 100 KB) with required names and no extras,
    and the bisected limits in the module docstring stay within a few per cent of the old budget's."""
    schema = {
        "type": "object",
        "properties": {
            "text": {"type": "string", "pattern": "^[a-z]*$", "maxLength": 200_000},
            "rows": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"id": {"type": "integer"}, "name": {"type": "string"}},
                    "required": ["id", "name"],
                    "additionalProperties": False,
                },
            },
        },
    }
    arguments = {"text": "a" * 100_000, "rows": [{"id": i, "name": "n"} for i in range(4_000)]}

    assert validate_against_schema("ew_big", schema, arguments) == arguments
    with pytest.raises(ValidationError, match="send fewer items"):
        validate_against_schema("ew_big", schema, {"rows": [{"id": i, "name": "n"} for i in range(9_000)]})


@pytest.fixture
def pooled() -> Iterator[None]:
    with override_settings(TOOLHUB={**settings.TOOLHUB, "TRANSACTION_POOLER": True}):
        yield


@pytest.fixture
def declared(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """For each server-side cursor opened, whether it is ``WITH HOLD`` (outlives its transaction: session state)."""
    holds: list[bool] = []
    original = psycopg.ServerCursor.execute

    def execute(self: Any, *args: Any, **kwargs: Any) -> Any:
        holds.append(self.withhold)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(psycopg.ServerCursor, "execute", execute)
    return holds


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_behind_a_pooler_a_new_connections_first_statement_as_a_chunked_read_holds_no_cursor(
    pooled: None, declared: list[bool]
) -> None:
    """Found: review ep's handler replaced ``chunked_cursor`` when the connection opened, but a new connection opens
    inside ``chunked_cursor`` itself: on a thread's own new connection (each ASGI request thread, a Celery worker's,
    a management command's) whose first statement is a chunked read outside a transaction, the call in progress was
    Django's, which declared the cursor ``WITH HOLD`` behind the pooler (the failure ep fixed: its next ``FETCH`` may
    reach another server connection). ep's test read on a connection opened before. Expect: no cursor held, whether
    the read opens a new thread's connection, reopens a closed one (``close_old_connections``) or runs on an open
    one; inside a transaction it still streams (a server-side cursor, not held)."""

    def read() -> list[Any]:
        return list(ToolCall.objects.values_list("id", flat=True).iterator(chunk_size=10))

    def in_new_thread() -> None:
        try:
            read()  # the thread's first statement: it opens the thread's connection
        finally:
            connections.close_all()

    worker = threading.Thread(target=in_new_thread)
    worker.start()
    worker.join()
    connection.close()
    read()
    close_old_connections()
    read()
    with transaction.atomic():
        read()

    assert declared == [False], declared  # only the read inside the transaction is server-side
