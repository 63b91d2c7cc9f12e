"""The shell tool: listed commands run, others wait for an operator and run once approved; caps, timeouts, env."""

import os
import shutil
import stat
import time
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import approval_approve, approval_reject
from tests.builtins.conftest import NAMES, CallBuiltin, refusal, tree
from tests.helpers import assert_audit_intact, event_types
from toolhub.builtins.shell import allow_list_problem
from toolhub.execution import tool_call_execute
from toolhub.models import CallStatus, ToolDefinition

pytestmark = pytest.mark.usefixtures("granted")

#: A command off the allow list that leaves a trace of each run in the workspace.
COUNTING = ["sh", "-c", "echo ran >> runs.txt; echo done"]


def test_a_listed_command_runs_in_the_workspace(call_builtin: CallBuiltin) -> None:
    call = call_builtin("execute_shell_command", {"argv": ["echo", "hello, world"]})

    assert call.status == CallStatus.SUCCEEDED, call.error
    assert call.result == {"exit_code": 0, "stdout": "hello, world\n", "stderr": "", "truncated": False}


def test_a_command_off_the_list_waits_for_approval_and_runs_once_when_approved(
    call_builtin: CallBuiltin, root: Path, operator: User, committed: Any
) -> None:
    # when the model asks for a command the list does not hold
    call = call_builtin("execute_shell_command", {"argv": COUNTING})

    # then an approval request says why, and nothing ran
    assert call.status == CallStatus.PENDING_APPROVAL
    request = ApprovalRequest.objects.get(call=call)
    assert "'sh' is not on the shell allow list" in request.reason
    assert not (root / "acme" / "runs.txt").exists()

    # when an operator approves it
    committed(approval_approve, request_id=request.pk, user=operator)

    # then it ran, once, and a second delivery of the call runs nothing more
    call.refresh_from_db()
    assert call.status == CallStatus.SUCCEEDED, call.error
    assert call.result["stdout"] == "done\n"
    assert tool_call_execute(call_id=call.id, worker="late-redelivery") is None
    assert (root / "acme" / "runs.txt").read_text() == "ran\n"
    assert event_types(call)[:2] == ["call.requested", "call.pending_approval"]
    assert_audit_intact()


def test_a_rejected_command_never_runs(call_builtin: CallBuiltin, root: Path, operator: User, committed: Any) -> None:
    call = call_builtin("execute_shell_command", {"argv": COUNTING})
    request = ApprovalRequest.objects.get(call=call)

    committed(approval_reject, request_id=request.pk, user=operator, comment="no shells")

    call.refresh_from_db()
    assert call.status == CallStatus.REJECTED
    assert ApprovalRequest.objects.get(pk=request.pk).status == ApprovalStatus.REJECTED
    assert not (root / "acme" / "runs.txt").exists()


def test_an_argument_outside_its_patterns_needs_approval(call_builtin: CallBuiltin) -> None:
    call = call_builtin("execute_shell_command", {"argv": ["cat", "../../etc/passwd"]})

    assert call.status == CallStatus.PENDING_APPROVAL
    assert "argument 1 of 'cat' names a path outside the workspace" in ApprovalRequest.objects.get(call=call).reason
    flagged = call_builtin("execute_shell_command", {"argv": ["cat", "notes.txt", "-n"]})
    assert flagged.status == CallStatus.PENDING_APPROVAL
    assert (
        "argument 2 of 'cat' matches none of its allowed patterns" in ApprovalRequest.objects.get(call=flagged).reason
    )


def test_output_is_capped_with_a_marker(call_builtin: CallBuiltin, settings: Any) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "SHELL_OUTPUT_MAX_BYTES": 1000}

    call = call_builtin("execute_shell_command", {"argv": ["seq", "1", "100000"]})

    assert call.status == CallStatus.SUCCEEDED, call.error
    stdout = call.result["stdout"]
    assert call.result["truncated"] is True
    assert stdout.startswith("1\n2\n3\n")
    kept, marker = stdout.split("\n[output truncated at 1000 bytes: ")
    assert len(kept.encode()) <= 1000
    assert marker.endswith("more bytes not shown]")
    assert int(marker.split()[0]) == len("".join(f"{n}\n" for n in range(1, 100001)).encode()) - 1000


def test_a_command_past_its_time_limit_is_killed_with_what_it_started(
    call_builtin: CallBuiltin, root: Path, settings: Any, operator: User, committed: Any
) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "SHELL_TIMEOUT_SECONDS": 0.5}
    # a listed command that sleeps too long
    started = time.monotonic()
    slow = call_builtin("execute_shell_command", {"argv": ["sleep", "20"]})
    assert slow.status == CallStatus.FAILED
    assert "did not finish within 0.5 s and was stopped" in slow.error
    assert time.monotonic() - started < 10

    # an approved command whose background child would write after the limit: the whole group is killed
    call = call_builtin("execute_shell_command", {"argv": ["sh", "-c", "(sleep 1.5; touch late.txt) & sleep 20"]})
    committed(approval_approve, request_id=ApprovalRequest.objects.get(call=call).pk, user=operator)
    call.refresh_from_db()
    assert call.status == CallStatus.FAILED
    time.sleep(2)
    assert not (root / "acme" / "late.txt").exists()


def test_no_environment_secret_reaches_the_command(
    call_builtin: CallBuiltin, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLHUB_TEST_API_KEY", "sk-very-secret-value")

    call = call_builtin("execute_shell_command", {"argv": ["env"]})

    assert call.status == CallStatus.SUCCEEDED, call.error
    variables = dict(line.split("=", 1) for line in call.result["stdout"].splitlines())
    assert set(variables) == {"PATH", "LANG", "LC_ALL", *_NO_USER_CONFIGURATION}
    assert "sk-very-secret-value" not in call.result["stdout"]


#: What the environment holds besides PATH and the locale: no configuration a tool could write is read.
_NO_USER_CONFIGURATION = {
    "HOME",
    "XDG_CONFIG_HOME",
    "CURL_HOME",
    "WGETRC",
    "GIT_CONFIG_NOSYSTEM",
    "GIT_CEILING_DIRECTORIES",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_KEY_0",
    "GIT_CONFIG_VALUE_0",
}
#: A git inspection an operator might list (init to make a repository, status to look at it).
_GIT = [{"command": "git", "arguments": ["init", "status", "-q"], "max_arguments": 2}]
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _environment(call_builtin: CallBuiltin) -> dict[str, str]:
    call = call_builtin("execute_shell_command", {"argv": ["env"]})
    assert call.status == CallStatus.SUCCEEDED, call.error
    return dict(line.split("=", 1) for line in call.result["stdout"].splitlines())


def test_home_is_an_empty_read_only_directory_outside_every_workspace(call_builtin: CallBuiltin, root: Path) -> None:
    variables = _environment(call_builtin)

    home = Path(variables["HOME"])
    assert variables["XDG_CONFIG_HOME"] == variables["CURL_HOME"] == str(home)
    assert not home.resolve().is_relative_to(root.resolve())
    assert home.is_dir() and not list(home.iterdir())
    assert stat.S_IMODE(home.stat().st_mode) == 0o500
    assert variables["GIT_CONFIG_NOSYSTEM"] == "1"
    assert variables["GIT_CONFIG_GLOBAL"] == variables["WGETRC"] == os.devnull


def test_a_home_something_was_written_into_is_replaced_by_an_empty_one(call_builtin: CallBuiltin) -> None:
    home = Path(_environment(call_builtin)["HOME"])
    home.chmod(0o700)
    (home / ".gitconfig").write_text("[core]\n\tfsmonitor = planted\n")

    replaced = Path(_environment(call_builtin)["HOME"])

    assert replaced != home and not list(replaced.iterdir())
    assert stat.S_IMODE(replaced.stat().st_mode) == 0o500
    shutil.rmtree(home)


@needs_git
@pytest.mark.parametrize("planted", [".gitconfig", ".config/git/config"])
def test_a_git_configuration_written_to_the_workspace_is_not_read_by_a_listed_git(
    call_builtin: CallBuiltin, root: Path, settings: Any, planted: str
) -> None:
    """The file tools write the workspace; a listed command reads no configuration from it as its user's."""
    settings.TOOLHUB = {**settings.TOOLHUB, "SHELL_COMMANDS": _GIT}
    content = '[core]\n\tfsmonitor = "echo ran > ran.txt; false"\n'
    assert call_builtin("write_text_file", {"file_path": planted, "content": content}).status == CallStatus.SUCCEEDED

    for argv in (["git", "init", "-q"], ["git", "status"]):
        call = call_builtin("execute_shell_command", {"argv": argv})
        assert call.status == CallStatus.SUCCEEDED and call.result["exit_code"] == 0, (call.error, call.result)

    assert not (root / "acme" / "ran.txt").exists()


@needs_git
def test_a_directory_the_file_tools_made_look_like_a_repository_is_not_taken_for_one(
    call_builtin: CallBuiltin, root: Path, settings: Any
) -> None:
    """HEAD, config, objects/ and refs/ written by the file tools: git refuses the implicit bare repository."""
    settings.TOOLHUB = {**settings.TOOLHUB, "SHELL_COMMANDS": _GIT}
    files = {
        "fake/HEAD": "ref: refs/heads/main\n",
        "fake/config": '[core]\n\tbare = false\n\tworktree = ..\n\tfsmonitor = "echo ran > ran.txt; false"\n',
        "fake/objects/keep": "",
        "fake/refs/keep": "",
    }
    for path, content in files.items():
        assert call_builtin("write_text_file", {"file_path": path, "content": content}).status == CallStatus.SUCCEEDED

    call = call_builtin("execute_shell_command", {"argv": ["git", "status"], "cwd": "fake"})

    assert call.status == CallStatus.SUCCEEDED and call.result["exit_code"] != 0
    assert "safe.bareRepository" in call.result["stderr"]
    assert not (root / "acme" / "ran.txt").exists()


@pytest.mark.parametrize(("cwd", "code"), [("..", "traversal"), ("/", "absolute"), ("../globex", "traversal")])
def test_the_working_directory_stays_in_the_workspace(
    call_builtin: CallBuiltin, root: Path, cwd: str, code: str
) -> None:
    call = call_builtin("execute_shell_command", {"argv": ["echo", "hi"], "cwd": cwd})

    assert call.status == CallStatus.FAILED
    assert refusal(call)["code"] == code
    assert call.result is None


def test_a_command_runs_in_a_subdirectory(call_builtin: CallBuiltin, root: Path) -> None:
    call_builtin("write_text_file", {"file_path": "docs/readme.txt", "content": "inside docs"})

    call = call_builtin("execute_shell_command", {"argv": ["cat", "readme.txt"], "cwd": "docs"})

    assert call.status == CallStatus.SUCCEEDED, call.error
    assert call.result["stdout"] == "inside docs"
    assert tree(root / "acme") == ["docs", "docs/readme.txt"]


def test_the_allow_list_matches_whole_arguments(root: Path, settings: Any) -> None:
    assert allow_list_problem(["echo", "hi there"]) is None
    assert allow_list_problem(["seq", "1", "2"]) is None
    assert allow_list_problem(["seq", "1", "2", "3"]) == "command 'seq' takes at most 2 arguments on the allow list"
    assert allow_list_problem(["seq", "1; rm -rf /"]) == "argument 1 of 'seq' matches none of its allowed patterns"
    assert allow_list_problem(["env", "X=1"]) == "argument 1 of 'env' matches none of its allowed patterns"
    assert allow_list_problem(["/bin/echo", "hi"]) == "command '/bin/echo' is not on the shell allow list"
    assert allow_list_problem([]) == "an empty command"
    # paths leaving the workspace need an operator even when a pattern is too loose to catch them
    settings.TOOLHUB = {**settings.TOOLHUB, "SHELL_COMMANDS": [{"command": "cat", "arguments": [".*"]}]}
    assert allow_list_problem(["cat", "notes/a.txt"]) is None
    for path in ("../x", "a/../../x", "/etc/passwd", "~/.ssh/id_rsa", ".."):
        assert allow_list_problem(["cat", path]) == "argument 1 of 'cat' names a path outside the workspace"
    # and so do paths attached to an option, or given to curl by '@'
    for argument in ("--file=/etc/passwd", "-f/etc/passwd", "if=/dev/sda", "--out=../x", "-o../x", "@/etc/passwd"):
        assert allow_list_problem(["cat", argument]) == "argument 1 of 'cat' names a path outside the workspace"
    for argument in ("--since=2024/01/01", "-n5", "key=value", "-", "--", "a=b/c"):
        assert allow_list_problem(["cat", argument]) is None


def test_calls_wait_for_an_operator_at_the_default_high_risk(call_builtin: CallBuiltin, root: Path) -> None:
    # given the code's risk again (the granted fixture had an operator lower it)
    ToolDefinition.objects.filter(name__in=NAMES).update(risk_override="")

    listed = call_builtin("execute_shell_command", {"argv": ["echo", "hi"]})
    view = call_builtin("view_text_file", {"file_path": "x.txt"})

    assert listed.status == view.status == CallStatus.PENDING_APPROVAL
    assert ApprovalRequest.objects.get(call=listed).reason == "risk is high"
