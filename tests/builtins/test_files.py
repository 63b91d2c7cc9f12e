"""The file tools: ranges work, and every way out of the tenant's workspace is refused, audited, and writes nothing."""

import os
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from tests.builtins.conftest import CallBuiltin, refusal, tree
from tests.helpers import assert_audit_intact, audit_text
from toolhub.models import CallStatus

pytestmark = pytest.mark.usefixtures("granted")


def test_write_view_with_ranges_insert_replace_and_list(call_builtin: CallBuiltin, root: Path) -> None:
    # given a file written by the tool
    written = call_builtin("write_text_file", {"file_path": "notes/todo.md", "content": "one\ntwo\nthree\nfour\n"})
    assert written.status == CallStatus.SUCCEEDED, written.error
    assert (root / "acme" / "notes" / "todo.md").read_text() == "one\ntwo\nthree\nfour\n"

    # when lines 2-3 are viewed, then only they come back, numbered
    view = call_builtin("view_text_file", {"file_path": "notes/todo.md", "start_line": 2, "end_line": 3})
    assert view.result == "2: two\n3: three"

    # when a line is inserted before line 2 and the end is appended to
    assert (
        call_builtin("insert_text_file", {"file_path": "notes/todo.md", "content": "1.5", "line_number": 2}).status
        == "succeeded"
    )
    appended = call_builtin("insert_text_file", {"file_path": "notes/todo.md", "content": "five\n", "line_number": 6})
    assert appended.status == CallStatus.SUCCEEDED, appended.error
    assert (root / "acme" / "notes" / "todo.md").read_text() == "one\n1.5\ntwo\nthree\nfour\nfive\n"

    # when lines 3-4 are replaced
    replaced = call_builtin(
        "write_text_file", {"file_path": "notes/todo.md", "content": "TWO-THREE", "start_line": 3, "end_line": 4}
    )
    assert replaced.status == CallStatus.SUCCEEDED, replaced.error
    assert call_builtin("view_text_file", {"file_path": "notes/todo.md"}).result == (
        "1: one\n2: 1.5\n3: TWO-THREE\n4: four\n5: five"
    )

    # then the listing shows the directory and the file with its size
    listing = call_builtin("list_directory", {"path": "notes"}).result
    assert listing == {
        "path": "notes",
        "entries": [{"name": "todo.md", "type": "file", "size": 28}],
        "truncated": False,
    }
    top = call_builtin("list_directory", {}).result
    assert top["entries"] == [{"name": "notes", "type": "directory", "size": None}]


def test_an_insert_past_the_end_and_a_range_past_the_end_are_errors_that_change_nothing(
    call_builtin: CallBuiltin, root: Path
) -> None:
    call_builtin("write_text_file", {"file_path": "a.txt", "content": "x\ny\n"})
    late = call_builtin("insert_text_file", {"file_path": "a.txt", "content": "z", "line_number": 9})
    assert late.status == CallStatus.FAILED
    assert "at most 3" in late.error
    assert call_builtin("view_text_file", {"file_path": "a.txt", "start_line": 7}).status == CallStatus.FAILED
    assert (root / "acme" / "a.txt").read_text() == "x\ny\n"


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("../escaped.txt", "traversal"),
        ("notes/../../escaped.txt", "traversal"),
        ("/tmp/escaped.txt", "absolute"),
        ("~/escaped.txt", "absolute"),
    ],
)
@pytest.mark.parametrize("tool_name", ["write_text_file", "insert_text_file", "view_text_file", "list_directory"])
def test_paths_leaving_the_workspace_are_refused_audited_and_nothing_is_written(
    call_builtin: CallBuiltin, root: Path, tool_name: str, path: str, code: str
) -> None:
    # given
    arguments = _arguments(tool_name, path)

    # when
    call = call_builtin(tool_name, arguments)

    # then the call failed with the reason, the audit trail says why, and the file system is untouched
    assert call.status == CallStatus.FAILED
    event = refusal(call)
    assert event["code"] == code
    assert event["tool"] == tool_name
    assert event["reason"] == call.error
    assert tree(root.parent) == ["workspaces", "workspaces/acme"]
    assert_audit_intact()


@pytest.mark.parametrize("tool_name", ["write_text_file", "insert_text_file", "view_text_file", "list_directory"])
def test_a_nul_byte_in_a_path_is_refused_before_the_tool_runs(
    call_builtin: CallBuiltin, root: Path, tool_name: str
) -> None:
    call = call_builtin(tool_name, _arguments(tool_name, "notes/a\x00b.txt"))

    assert call.status == CallStatus.INVALID
    assert "NUL" in call.error
    assert "NUL" in audit_text(call)
    assert tree(root.parent) == []


def _arguments(tool_name: str, path: str) -> dict[str, object]:
    if tool_name == "view_text_file":
        return {"file_path": path}
    if tool_name == "list_directory":
        return {"path": path}
    if tool_name == "insert_text_file":
        return {"file_path": path, "content": "pwned", "line_number": 1}
    return {"file_path": path, "content": "pwned"}


def test_symlinks_are_never_followed(call_builtin: CallBuiltin, root: Path) -> None:
    # given a directory and a file outside the workspace, and links to them inside it
    outside = root.parent / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret")
    call_builtin("list_directory", {})  # creates acme's workspace
    os.symlink(outside, root / "acme" / "linkdir")
    os.symlink(outside / "secret.txt", root / "acme" / "link.txt")
    os.symlink("real.txt", root / "acme" / "inner.txt")  # even a link that stays inside
    (root / "acme" / "real.txt").write_text("real")

    attempts = [
        ("view_text_file", {"file_path": "link.txt"}),
        ("view_text_file", {"file_path": "linkdir/secret.txt"}),
        ("view_text_file", {"file_path": "inner.txt"}),
        ("write_text_file", {"file_path": "linkdir/new.txt", "content": "pwned"}),
        ("write_text_file", {"file_path": "link.txt", "content": "pwned"}),
        ("insert_text_file", {"file_path": "link.txt", "content": "pwned", "line_number": 1}),
        ("list_directory", {"path": "linkdir"}),
        ("execute_shell_command", {"argv": ["echo", "hi"], "cwd": "linkdir"}),
    ]
    for tool_name, arguments in attempts:
        call = call_builtin(tool_name, arguments)
        assert call.status == CallStatus.FAILED, (tool_name, arguments)
        assert refusal(call)["code"] == "symlink", (tool_name, arguments)
        assert "top secret" not in str(call.result)

    # then nothing outside changed, and the links are still links
    assert tree(outside) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "top secret"
    assert (root / "acme" / "link.txt").is_symlink()


def test_special_binary_hardlinked_and_oversized_files_are_refused(
    call_builtin: CallBuiltin, root: Path, settings
) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "BUILTIN_FILE_MAX_BYTES": 100}
    call_builtin("list_directory", {})
    workspace = root / "acme"
    os.mkfifo(workspace / "pipe")
    (workspace / "blob.bin").write_bytes(b"\x89PNG\x00\x01\x02")
    (workspace / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    (workspace / "big.txt").write_text("x" * 101)
    (workspace / "linked.txt").write_text("shared")
    os.link(workspace / "linked.txt", root.parent / "elsewhere.txt")

    cases = [
        ("view_text_file", {"file_path": "pipe"}, "special_file"),
        ("write_text_file", {"file_path": "pipe", "content": "x"}, "special_file"),
        ("view_text_file", {"file_path": "blob.bin"}, "binary"),
        ("view_text_file", {"file_path": "latin1.txt"}, "binary"),
        ("view_text_file", {"file_path": "big.txt"}, "too_large"),
        ("write_text_file", {"file_path": "new.txt", "content": "y" * 101}, "too_large"),
        ("insert_text_file", {"file_path": "big.txt", "content": "y", "line_number": 1}, "too_large"),
        ("view_text_file", {"file_path": "linked.txt"}, "hardlink"),
        ("insert_text_file", {"file_path": "linked.txt", "content": "y", "line_number": 1}, "hardlink"),
    ]
    for tool_name, arguments, code in cases:
        call = call_builtin(tool_name, arguments)
        assert call.status == CallStatus.FAILED, (tool_name, arguments)
        assert refusal(call)["code"] == code, (tool_name, arguments)
    assert not (workspace / "new.txt").exists()
    assert (workspace / "big.txt").read_text() == "x" * 101


def test_a_tenant_never_reads_another_tenants_workspace(
    call_builtin: CallBuiltin, root: Path, globex_member: User
) -> None:
    # given acme's file
    call_builtin("write_text_file", {"file_path": "plans.txt", "content": "acme only"})

    # when globex asks for the same path, or lists its workspace
    view = call_builtin("view_text_file", {"file_path": "plans.txt"}, tenant="globex", user=globex_member)
    listing = call_builtin("list_directory", {}, tenant="globex", user=globex_member)

    # then globex has its own, empty, workspace
    assert view.status == CallStatus.FAILED
    assert "acme only" not in view.error
    assert listing.result["entries"] == []
    assert (root / "globex").is_dir()


def test_the_tenant_comes_from_the_call_not_from_a_context_that_disagrees(
    request_call, alice: User, root: Path
) -> None:
    # given a call for acme whose context claims globex
    call = request_call("list_directory", {}, alice, tenant="acme", context={"tenant": "globex"})

    # then it is refused before touching any workspace
    assert call.status == CallStatus.FAILED
    assert refusal(call)["code"] == "tenant_mismatch"
    assert tree(root.parent) == []


def test_a_tenant_argument_cannot_choose_the_workspace(call_builtin: CallBuiltin) -> None:
    call = call_builtin("list_directory", {"path": ".", "tenant": "globex"})
    assert call.status == CallStatus.INVALID


def test_a_call_without_a_tenant_touches_no_workspace(request_call, alice: User, root: Path) -> None:
    call = request_call("list_directory", {}, alice, tenant="", context={})

    assert call.status == CallStatus.FAILED
    assert refusal(call)["code"] == "no_tenant"
    assert tree(root.parent) == []


@pytest.mark.parametrize("path", [".git", ".git/config", "repo/.git/hooks/pre-commit", ".GIT/config", "./.git/HEAD"])
def test_writing_under_a_git_directory_is_refused_audited_and_nothing_is_written(
    call_builtin: CallBuiltin, root: Path, path: str
) -> None:
    """git runs what a repository's own configuration says (``core.fsmonitor``, hooks): never written by a tool."""
    call = call_builtin("write_text_file", {"file_path": path, "content": '[core]\n\tfsmonitor = "touch ran"\n'})

    assert call.status == CallStatus.FAILED
    event = refusal(call)
    assert event["code"] == "vcs_config" and event["reason"] == call.error
    assert tree(root.parent) == ["workspaces", "workspaces/acme"]
    assert_audit_intact()


@pytest.mark.parametrize(
    "arguments",
    [
        {"file_path": ".git/config", "content": "[core]\n\tfsmonitor = ran\n"},
        {"file_path": ".git/config", "content": "[core]\n\tfsmonitor = ran\n", "start_line": 1, "end_line": 1},
    ],
)
def test_an_existing_git_configuration_can_be_read_but_not_changed(
    call_builtin: CallBuiltin, root: Path, arguments: dict[str, object]
) -> None:
    (root / "acme" / ".git").mkdir(parents=True)
    (root / "acme" / ".git" / "config").write_text("[core]\n\tbare = false\n")

    viewed = call_builtin("view_text_file", {"file_path": ".git/config"})
    written = call_builtin("write_text_file", arguments)
    inserted = call_builtin("insert_text_file", {"file_path": ".git/config", "content": "x", "line_number": 1})

    assert viewed.status == CallStatus.SUCCEEDED and "bare = false" in viewed.result
    assert written.status == inserted.status == CallStatus.FAILED
    assert refusal(written)["code"] == refusal(inserted)["code"] == "vcs_config"
    assert (root / "acme" / ".git" / "config").read_text() == "[core]\n\tbare = false\n"
    assert sorted(p.name for p in (root / "acme" / ".git").iterdir()) == ["config"]


def test_a_name_merely_containing_git_is_written(call_builtin: CallBuiltin, root: Path) -> None:
    for path in (".gitignore", "git/config", "notes.git", ".github/workflow.yml"):
        assert call_builtin("write_text_file", {"file_path": path, "content": "x"}).status == CallStatus.SUCCEEDED
    assert (root / "acme" / ".gitignore").read_text() == "x"
