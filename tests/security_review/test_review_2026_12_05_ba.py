"""Review of 2026-12-05 (ba): the built-in tools (shell, workspace files, quota, access).

Each test fails on the reviewed code (main at 317e64f) and states what was found and what is expected.

Findings:
- a listed ``git`` run in a tenant's workspace found the repository *above* ``WORKSPACE_ROOT`` (a deployment's own
  checkout, e.g. ``/srv/toolhub`` with ``/srv/toolhub/workspaces``) and showed its files and history to the model.
- a command whose output held a NUL byte (a listed ``cat`` of a binary file, ``grep -a``, ``-print0``) ran, and its
  call failed with "returned a value that cannot be serialized to JSON": the model lost the output and was told
  nothing true about it.
- ``list_directory`` of a directory holding one name that is not UTF-8 (an approved ``tar``/``unzip``/``git``
  leaves them) failed the same way: no entry of that directory could be listed any more.
- writing a file whose name is valid on disk but long in UTF-8 (80 CJK characters, 240 bytes) failed with
  "internal error (OSError) ... do not retry": the temporary name kept 100 *characters* of it, past 255 bytes;
  a name past the file system's limit was the same internal error instead of a message saying why.

Checked and holds (no test here): ``..``, absolute, ``\\``, ``~``, drive-letter and NUL paths are refused before
any open; every component is opened ``O_NOFOLLOW`` from a descriptor, so a symlink swapped in is refused, never
followed; reads refuse hard links, FIFOs (``O_NONBLOCK``) and devices; writes rename a temporary file (a symlink
at the name is replaced, not followed); ``.git`` in any case is refused for writes; the tenant is the call row's,
a context naming another tenant is refused, and slugs are one safe component, so one tenant's workspace never
reaches another's; the shell runs ``shell=False`` with a fixed ``PATH``, a bare command name, ``close_fds``, no
server environment, a capped output and a killed process group; an error that is not a ``ToolError`` reaches the
model only as its class name; the quota counts before creating and refuses depth past 64.
"""

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.builtins.conftest import CallBuiltin, call_builtin, granted, root  # noqa: F401 - fixtures
from tests.builtins.conftest import builtins as builtins  # noqa: F401 - fixture
from toolhub.models import CallStatus

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("granted")]

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@needs_git
def test_a_listed_git_does_not_read_the_repository_above_the_workspace_root(
    call_builtin: CallBuiltin,  # noqa: F811 - the fixture
    root: Path,  # noqa: F811 - the fixture
    settings: Any,
) -> None:
    """Found: with ``WORKSPACE_ROOT`` inside a git checkout (the deployment's own), a listed ``git show`` in
    acme's workspace printed the checkout's ``settings.py``. Expect: git looks for a repository no higher than the
    tenant's own workspace; the parent's files stay unseen."""
    deployment = root.parent
    (deployment / "settings.py").write_text("SECRET_KEY = 'server-only-value'\n")
    git = ["git", "-c", "user.name=x", "-c", "user.email=x@example.com"]
    subprocess.run([*git, "init", "-q", str(deployment)], check=True)
    subprocess.run([*git, "-C", str(deployment), "add", "settings.py"], check=True)
    subprocess.run([*git, "-C", str(deployment), "commit", "-qm", "deploy"], check=True)
    settings.TOOLHUB = {
        **settings.TOOLHUB,
        "SHELL_COMMANDS": [{"command": "git", "arguments": ["show", "log", "-p", r"HEAD:[\w.]+"]}],
    }

    call = call_builtin("execute_shell_command", {"argv": ["git", "show", "HEAD:settings.py"]})

    assert call.status == CallStatus.SUCCEEDED, call.error
    assert "server-only-value" not in call.result["stdout"]
    assert call.result["exit_code"] != 0


def test_a_command_whose_output_holds_a_nul_byte_returns_its_output(
    call_builtin: CallBuiltin,  # noqa: F811 - the fixture
    root: Path,  # noqa: F811 - the fixture
) -> None:
    """Found: ``cat`` of a file holding a NUL ran and the call failed with "cannot be serialized to JSON".
    Expect: the call succeeds; the NUL is shown escaped, the rest of the output as it was."""
    workspace = root / "acme"
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "data.bin").write_bytes(b"head\x00tail\n")

    call = call_builtin("execute_shell_command", {"argv": ["cat", "data.bin"]})

    assert call.status == CallStatus.SUCCEEDED, call.error
    assert call.result["stdout"] == "head\\u0000tail\n"


def test_a_name_that_is_not_utf8_does_not_break_the_listing_of_its_directory(
    call_builtin: CallBuiltin,  # noqa: F811 - the fixture
    root: Path,  # noqa: F811 - the fixture
) -> None:
    """Found: one file named with a latin-1 byte made ``list_directory`` fail ("cannot be serialized to JSON") for
    the whole directory. Expect: the listing succeeds, that name shown with the byte escaped, the others as they are."""
    workspace = root / "acme"
    workspace.mkdir(parents=True, exist_ok=True)
    (workspace / "notes.txt").write_text("hi\n")
    with open(bytes(workspace) + b"/caf\xe9.txt", "wb") as handle:
        handle.write(b"x")

    call = call_builtin("list_directory", {"path": "."})

    assert call.status == CallStatus.SUCCEEDED, call.error
    names = [entry["name"] for entry in call.result["entries"]]
    assert names == ["caf\\udce9.txt", "notes.txt"]


def test_a_long_utf8_name_the_file_system_takes_can_be_written(
    call_builtin: CallBuiltin,  # noqa: F811 - the fixture
    root: Path,  # noqa: F811 - the fixture
) -> None:
    """Found: an 80-character CJK name (240 bytes, valid) failed with "internal error (OSError)": the temporary
    file's name kept 100 characters of it. Expect: the file is written under its name."""
    name = "報" * 80

    call = call_builtin("write_text_file", {"file_path": name, "content": "ok\n"})

    assert call.status == CallStatus.SUCCEEDED, call.error
    assert (root / "acme" / name).read_text() == "ok\n"
    assert [path.name for path in (root / "acme").iterdir()] == [name]


@pytest.mark.parametrize("tool", ["write_text_file", "view_text_file"])
def test_a_name_past_the_file_systems_limit_is_refused_with_a_reason(
    call_builtin: CallBuiltin,  # noqa: F811 - the fixture
    tool: str,
) -> None:
    """Found: a 300-character name was "internal error (OSError) ... do not retry with the same arguments".
    Expect: a ToolError the model can act on, saying the name is too long."""
    arguments = {"file_path": "n" * 300, **({"content": "x"} if tool == "write_text_file" else {})}

    call = call_builtin(tool, arguments)

    assert call.status == CallStatus.FAILED
    assert "internal error" not in call.error
    assert "too long" in call.error
