"""A ``Secret`` preset's value is never stored or shown, whichever way out of the tool it takes."""

import base64
import functools
import hashlib
import json
import logging
import threading
import time

import pytest
from django.contrib.auth.models import User
from pydantic import SecretBytes, SecretStr

from tests.helpers import RequestCall
from tests.toolsec.conftest import StartRun
from tests.toolsec.leakapp.tools import SECRET_ENV, leaky
from tests.toolsec.leaks import SECRET, assert_no_secret, traces_of
from toolhub import ToolResult, registry, tool
from toolhub.exceptions import ToolhubError
from toolhub.models import CallStatus, ToolCall, ToolCallArtifact
from toolhub.tools import secrets as secrets_module
from toolhub.tools.secrets import SecretScrubber, sensitive_values
from toolhub.tools.timeouts import call_with_timeout

pytestmark = pytest.mark.django_db


@pytest.fixture
def request_call(request_call: RequestCall, monkeypatch: pytest.MonkeyPatch) -> RequestCall:
    """Calls for tenant acme, with the leaky tool registered and its secret set."""
    monkeypatch.setenv(SECRET_ENV, SECRET)
    return functools.partial(request_call, tenant="acme")


def _leak(request_call: RequestCall, channel: str, caplog: pytest.LogCaptureFixture) -> ToolCall:
    caplog.set_level(logging.DEBUG)
    with registry.temporarily(leaky):
        call = request_call("leaky", {"channel": channel})
    logged = [caplog.text, *(r.getMessage() for r in caplog.records), *(r.exc_text or "" for r in caplog.records)]
    assert_no_secret(traces_of(call), *logged)
    # the tool's log lines are kept, with the secret replaced
    assert "calling upstream with key [secret] (url-encoded [secret])" in caplog.text
    assert all(record.exc_info is None for record in caplog.records)
    return call


def test_an_exception_quoting_the_secret(request_call: RequestCall, caplog: pytest.LogCaptureFixture) -> None:
    call = _leak(request_call, "exception", caplog)

    assert call.status == CallStatus.FAILED
    assert call.error.startswith("The tool failed with an internal error (RuntimeError)")
    assert "headers={'Authorization': 'Bearer [secret]'}, raw=b'[secret]'" in call.error_detail
    # the tracebacks the tool and the worker logged are there, scrubbed
    assert "ConnectionError: upstream said 401 for [secret]" in caplog.text
    assert "RuntimeError: request failed: headers={'Authorization': 'Bearer [secret]'}" in caplog.text


def test_a_tool_error_and_an_error_result(request_call: RequestCall, caplog: pytest.LogCaptureFixture) -> None:
    raised = _leak(request_call, "tool_error", caplog)
    returned = _leak(request_call, "error_result", caplog)

    assert raised.status == returned.status == CallStatus.FAILED
    assert raised.error == "The service refused key [secret]; url https://svc.example/?key=[secret]"
    assert raised.model_text() == raised.error
    assert returned.error == "refused: [secret]"


def test_a_result_with_the_secret_nested_in_values_keys_and_models(
    request_call: RequestCall, caplog: pytest.LogCaptureFixture
) -> None:
    data = _leak(request_call, "result", caplog)
    text = _leak(request_call, "text", caplog)

    assert data.status == text.status == CallStatus.SUCCEEDED
    assert data.result == {
        "key": "[secret]",
        "nested": [{"deep": "x[secret]y"}, ["[secret]"]],
        "[secret]": "the key as a key",
        "model": {"user": "bot", "token": "[secret]"},
    }
    assert text.result == "key=[secret]"


def test_progress_messages(request_call: RequestCall, caplog: pytest.LogCaptureFixture) -> None:
    call = _leak(request_call, "progress", caplog)

    assert call.status == CallStatus.SUCCEEDED
    # replaced before the message is cut to 500 characters, so no part of the secret is left
    assert [update["message"] for update in call.progress] == ["authenticated with [secret]", "x" * 490 + "[secret]"]


def test_text_artifacts_are_scrubbed(request_call: RequestCall, caplog: pytest.LogCaptureFixture) -> None:
    csv = _leak(request_call, "text_artifact", caplog)
    data = _leak(request_call, "json_artifact", caplog)

    assert csv.status == data.status == CallStatus.SUCCEEDED
    assert csv.result == "see [secret]"
    stored = ToolCallArtifact.objects.get(call=csv)
    content = bytes(stored.content)
    assert (stored.name, content) == ("keys-[secret].csv", b"name,token\nbot,[secret]\n")
    assert (stored.size, stored.sha256) == (len(content), hashlib.sha256(content).hexdigest())
    assert json.loads(bytes(ToolCallArtifact.objects.get(call=data).content)) == {
        "list": ["[secret]"],
        "token": "[secret]",
    }


def test_a_binary_artifact_holding_the_secret_is_refused(
    request_call: RequestCall, caplog: pytest.LogCaptureFixture
) -> None:
    refused = _leak(request_call, "binary_artifact", caplog)
    clean = _leak(request_call, "clean_binary_artifact", caplog)

    assert refused.status == CallStatus.FAILED
    assert refused.error.startswith("The tool's artifact 'img.png' (image/png) is binary and contains a secret value")
    assert not ToolCallArtifact.objects.filter(call=refused).exists()
    # binary content without the secret is stored byte for byte
    assert clean.status == CallStatus.SUCCEEDED
    assert bytes(ToolCallArtifact.objects.get(call=clean).content) == b"\x89PNG\r\n\x1a\n\x00\xff\x00"


@pytest.mark.parametrize("charset", ["utf-16", "utf-16-be", "latin-1", "cp1252", '"UTF-16"'])
def test_a_text_artifact_is_scrubbed_in_its_declared_charset(charset: str) -> None:
    codec = charset.strip('"')
    text = f"name\tkey\r\nalice\t{SECRET}\r\n"
    scrubbed = SecretScrubber([SECRET]).artifact(text.encode(codec), f"text/plain; charset={charset}")

    assert scrubbed is not None
    assert scrubbed.decode(codec) == "name\tkey\r\nalice\t[secret]\r\n"


@pytest.mark.parametrize(
    ("media_type", "content"),
    [
        ("text/plain; charset=utf-8", f"key {SECRET}".encode("utf-16")),  # declared UTF-8, written as UTF-16
        ("text/csv", f"key,{SECRET}".encode("utf-16-le")),  # no charset: read as UTF-8, holds UTF-16
        ("text/plain; charset=latin-1", f"key {SECRET}".encode("utf-16-be")),
        ("text/plain; charset=x-no-such-charset", f"key {SECRET}".encode()),  # cannot be read: checked as bytes
        ("text/plain; charset=utf-16", f"key {SECRET}".encode() + b"\x00"),  # odd length: not UTF-16 at all
    ],
    ids=["utf16-declared-utf8", "utf16le-no-charset", "utf16be-declared-latin1", "unknown-charset", "not-utf16"],
)
def test_a_text_artifact_holding_the_secret_in_another_encoding_than_declared_is_refused(
    media_type: str, content: bytes
) -> None:
    assert SecretScrubber([SECRET]).artifact(content, media_type) is None


@tool(sensitive=("card",))
def mislabelled_export(card: str) -> ToolResult:
    """Export a card as UTF-16 text declared UTF-8 (a mislabelled 'Unicode Text' file)."""
    return ToolResult.artifact(f"card\t{card}".encode("utf-16"), name="cards.txt", media_type="text/plain")


def test_a_call_whose_text_artifact_holds_a_sensitive_value_in_another_encoding_fails_with_nothing_stored(
    request_call: RequestCall,
) -> None:
    with registry.temporarily(mislabelled_export):
        call = request_call("mislabelled_export", {"card": "4111111111111111"})

    assert call.status == CallStatus.FAILED
    assert call.error.startswith(
        "The tool's artifact 'cards.txt' (text/plain) holds a secret value that could not be replaced"
    ), call.error
    assert not ToolCallArtifact.objects.filter(call=call).exists()


def test_a_text_artifact_in_an_unknown_charset_without_the_secret_is_kept_as_it_is() -> None:
    content = "no secret here".encode("utf-16")
    assert SecretScrubber([SECRET]).artifact(content, "text/plain; charset=x-no-such-charset") == content


def test_a_secret_that_is_part_of_the_marker_does_not_refuse_the_scrubbed_text() -> None:
    # "secret" is inside "[secret]": what replaced it must not count as what is left of it
    assert SecretScrubber(["secret"]).artifact(b"the secret", "text/plain") == b"the [secret]"
    scrubbed = SecretScrubber(["secret"]).artifact("the secret".encode("utf-16"), "text/plain; charset=utf-16")
    assert scrubbed is not None and scrubbed.decode("utf-16") == "the [secret]"


def test_a_result_that_cannot_be_serialized(request_call: RequestCall, caplog: pytest.LogCaptureFixture) -> None:
    call = _leak(request_call, "unserializable", caplog)

    assert call.status == CallStatus.FAILED
    assert call.error == "The tool returned a value that cannot be serialized to JSON."


def test_what_the_model_is_told_in_a_run(
    start_run: StartRun, alice: User, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # given an agent whose tool leaks through an error, then through its result
    monkeypatch.setenv(SECRET_ENV, SECRET)
    script = [
        {"tool_calls": [{"name": "leaky", "arguments": {"channel": "tool_error"}}]},
        {"tool_calls": [{"name": "leaky", "arguments": {"channel": "result"}}]},
        {"content": "Got {last_tool_result}"},
    ]
    with registry.temporarily(leaky):
        run = start_run(alice, tools=["leaky"], script=script)

    # then the conversation, the output and every call's traces hold the marker, never the secret
    calls = list(ToolCall.objects.filter(run_id=run.id).order_by("turn"))
    assert [call.status for call in calls] == [CallStatus.FAILED, CallStatus.SUCCEEDED]
    assert_no_secret(json.dumps(run.messages), run.output, caplog.text, *(traces_of(call) for call in calls))
    told = [message["content"] for message in run.messages if message["role"] == "tool"]
    assert told[0].startswith("The service refused key [secret]")
    assert '"key": "[secret]"' in told[1] and '"key": "[secret]"' in run.output


def test_a_missing_secret_fails_the_call_clearly(request_call: RequestCall, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SECRET_ENV)
    with registry.temporarily(leaky):
        call = request_call("leaky", {"channel": "result"})

    assert call.status == CallStatus.FAILED
    assert "not configured on this server" in call.error
    assert f"secret {SECRET_ENV!r} for parameter 'api_key' is not set" in call.error_detail


def test_an_error_escaping_the_scope_is_replaced_by_a_scrubbed_one() -> None:
    # an infrastructure error after the tool ran (the database, say) is logged by Celery: it must not quote it
    with pytest.raises(ToolhubError) as raised, SecretScrubber([SECRET]).scope():
        raise RuntimeError(f"could not store {SECRET!r}")

    assert SECRET not in str(raised.value)
    assert "RuntimeError: could not store '[secret]'" in str(raised.value)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_short_or_unset_values_change_nothing() -> None:
    assert SecretScrubber(["abc", ""]).text("abc def") == "abc def"
    assert SecretScrubber([]).value({"a": [1, "b"]}) == {"a": [1, "b"]}


def test_the_log_scope_follows_a_tool_into_its_time_limit_thread(caplog: pytest.LogCaptureFixture) -> None:
    # off the main thread a tool runs in a helper thread (to enforce its time limit): its logs are scrubbed too
    caplog.set_level(logging.INFO)

    def worker_thread() -> None:
        with SecretScrubber([SECRET]).scope():
            call_with_timeout(lambda: logging.getLogger("tool").warning("key %s", SECRET), seconds=5, tool_name="t")

    thread = threading.Thread(target=worker_thread)
    thread.start()
    thread.join()

    assert "key [secret]" in caplog.text
    assert_no_secret(caplog.text)


def test_a_thread_without_the_calls_context_is_scrubbed_while_a_scope_is_active_or_lately_left(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A thread the tool starts without copying its context (a pool) cannot tell whose call it works for: it is
    # scrubbed of every active scope's secrets (two calls running at once here), and of those of the scopes
    # left within the linger (the thread may outlive its call), not later.
    monkeypatch.setattr(secrets_module, "_running", secrets_module._RunningScopes(linger=0.5, keep=256))
    caplog.set_level(logging.INFO)
    other = "other-calls-key-9d2f"
    log = logging.getLogger("tool")

    def in_a_bare_thread(message: str) -> None:
        thread = threading.Thread(target=log.warning, args=(message,))
        thread.start()
        thread.join()

    with SecretScrubber([SECRET]).scope():
        running_elsewhere = threading.Event()
        done = threading.Event()

        def another_call() -> None:
            with SecretScrubber([other]).scope():
                running_elsewhere.set()
                done.wait(5)

        elsewhere = threading.Thread(target=another_call)
        elsewhere.start()
        running_elsewhere.wait(5)
        in_a_bare_thread(f"pool: key {SECRET}, {other}")
        done.set()
        elsewhere.join()
        in_a_bare_thread(f"pool again: key {other}")
    in_a_bare_thread(f"after: key {SECRET}")
    time.sleep(0.6)
    in_a_bare_thread(f"much later: key {SECRET}")

    assert "pool: key [secret], [secret]" in caplog.text
    assert "pool again: key [secret]" in caplog.text  # that call ended a moment ago: its thread may still work
    assert "after: key [secret]" in caplog.text
    assert f"much later: key {SECRET}" in caplog.text  # no scope active or lately left: nothing is rewritten


def test_the_scopes_lately_left_are_kept_up_to_a_number() -> None:
    running = secrets_module._RunningScopes(linger=60.0, keep=2)
    for value in ("first-key-0001", "second-key-0002", "third-key-0003"):
        running.leave(running.enter(SecretScrubber([value])))

    union = running.union()
    assert union is not None and union.values == ("second-key-0002", "third-key-0003")


@tool(sensitive=("password", "pins"))
def sensitive_echo(username: str, password: str, pins: list[int], fail: bool = False) -> dict:
    """Log in downstream (repeats what it was given, as a careless tool would)."""
    logging.getLogger("sensitive_echo").warning("logging in %s with %s", username, password)
    if fail:
        raise ValueError(f"login refused for {username}: password {password!r}, pin {pins[0]}")
    return {"user": username, "password_used": password, "pins": pins}


@pytest.mark.parametrize("fail", [False, True], ids=["result", "exception"])
def test_a_tool_repeating_its_sensitive_arguments_has_them_replaced_wherever_it_repeats_them(
    request_call: RequestCall, caplog: pytest.LogCaptureFixture, fail: bool
) -> None:
    """A sensitive argument is redacted wherever the call's arguments are shown; repeated by the tool, in its
    result, an error or a log line, it is replaced like a secret (nested numbers included)."""
    caplog.set_level(logging.DEBUG)
    password, pin = "hunter2-correct-horse", 918273
    with registry.temporarily(sensitive_echo):
        call = request_call("sensitive_echo", {"username": "carol", "password": password, "pins": [pin], "fail": fail})

    # the row keeps the arguments the tool ran with (shown redacted); everything else was kept without them
    stored = ToolCall.objects.filter(pk=call.pk).values_list("arguments", flat=True).get()
    assert stored["password"] == password
    traces = traces_of(call).replace(json.dumps(stored), "") + caplog.text
    assert password not in traces and str(pin) not in traces
    assert "logging in carol with [secret]" in caplog.text
    if fail:
        assert call.status == CallStatus.FAILED and "password '[secret]', pin [secret]" in call.error_detail
    else:
        assert call.result == {"user": "carol", "password_used": "[secret]", "pins": ["[secret]"]}


def test_a_secrets_base64_forms_are_replaced_too() -> None:
    """A server or a tool echoing the value base64-encoded (standard or URL-safe, padded or not)."""
    value = "sk-live/AbC+dEf=12345~?"
    scrubber = SecretScrubber([value])
    raw = value.encode()
    for encoded in (base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()):
        assert scrubber.text(f"token={encoded};") == "token=[secret];"
        assert scrubber.text(f"token={encoded.rstrip('=')}") == "token=[secret]"


def test_an_open_schemas_extra_argument_shows_only_under_the_version_it_was_made_with(
    request_call: RequestCall, alice: User
) -> None:
    """A tool with no secret admitting other names (a remote server's): an extra is shown for its own version.

    Once the tool changed, a name it does not declare may have been a sensitive parameter it dropped
    (test_probe_2026_12_04_n): withheld, as for a renamed one.
    """
    from toolhub.selectors import displayed_arguments
    from toolhub.tools.definition import Tool

    open_schema = {"type": "object", "properties": {"query": {"type": "string"}}}
    v1 = Tool.create("open_lookup", "Look a customer up.", open_schema, lambda a: "found", risk="low")
    v2 = Tool.create("open_lookup", "Look a customer up by name.", open_schema, lambda a: "found", risk="low")
    with registry.temporarily(v1):
        call = request_call("open_lookup", {"query": "acme", "region": "eu-west"}, alice, tenant="acme")
        assert displayed_arguments(call) == {"query": "acme", "region": "eu-west"}
    with registry.temporarily(v2):
        assert displayed_arguments(call) == {"query": "acme", "region": "***redacted***"}


def test_a_pydantic_secret_among_sensitive_arguments_counts_as_its_value_not_its_mask() -> None:
    arguments = {"pin": SecretStr("4821-7730"), "keys": [SecretBytes(b"k-99887766")], "door": "D-7"}

    values = sensitive_values(arguments, ("pin", "keys"))

    assert "4821-7730" in values and "k-99887766" in values
    assert "**********" not in values and "D-7" not in values
    assert SecretScrubber(values).text("opened with 4821-7730 and k-99887766") == "opened with [secret] and [secret]"
