"""A tenant's workspace holds at most BUILTIN_WORKSPACE_MAX_BYTES in BUILTIN_WORKSPACE_MAX_ENTRIES entries.

One file is bounded by BUILTIN_FILE_MAX_BYTES; without a bound on the workspace a model could fill the disk
that every tenant's workers share, one file at a time.
"""

from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from tests.builtins.conftest import CallBuiltin, refusal, tree
from toolhub.models import CallStatus

pytestmark = pytest.mark.usefixtures("granted")


@pytest.fixture
def small_workspaces(settings: Any) -> None:
    settings.TOOLHUB = {**settings.TOOLHUB, "BUILTIN_WORKSPACE_MAX_BYTES": 100, "BUILTIN_WORKSPACE_MAX_ENTRIES": 5}


@pytest.mark.usefixtures("small_workspaces")
def test_a_write_past_the_workspace_bytes_is_refused_audited_and_writes_nothing(
    call_builtin: CallBuiltin, root: Path
) -> None:
    # given 90 of the workspace's 100 bytes used
    assert call_builtin("write_text_file", {"file_path": "a.txt", "content": "a" * 60}).status == "succeeded"
    assert call_builtin("write_text_file", {"file_path": "b.txt", "content": "b" * 30}).status == "succeeded"

    # when a new file of 11 bytes, an insert of 11 and a nested new file are asked for
    new = call_builtin("write_text_file", {"file_path": "c.txt", "content": "c" * 11})
    grown = call_builtin("insert_text_file", {"file_path": "b.txt", "content": "d" * 10, "line_number": 1})
    nested = call_builtin("write_text_file", {"file_path": "deep/er/c.txt", "content": "c" * 11})

    # then each is refused with a reason the model can act on, audited, and nothing was written
    for call in (new, grown, nested):
        assert call.status == CallStatus.FAILED
        assert refusal(call)["code"] == "quota"
        assert "holds 90 bytes in 2 files and directories" in call.error
        assert "Write less, or overwrite a file you no longer need" in call.error
    assert tree(root / "acme") == ["a.txt", "b.txt"]
    assert (root / "acme" / "b.txt").read_text() == "b" * 30

    # while a write that fits exactly, and one that replaces a file, still go through
    assert call_builtin("write_text_file", {"file_path": "c.txt", "content": "c" * 10}).status == "succeeded"
    replaced = call_builtin("write_text_file", {"file_path": "a.txt", "content": "A" * 55})
    assert replaced.status == CallStatus.SUCCEEDED, replaced.error
    assert (root / "acme" / "a.txt").read_text() == "A" * 55


@pytest.mark.usefixtures("small_workspaces")
def test_entries_are_bounded_too_and_directories_a_write_would_create_count(
    call_builtin: CallBuiltin, root: Path
) -> None:
    # given 4 of 5 entries used: two files, a directory and a file in it
    for path in ("one.txt", "two.txt", "dir/three.txt"):
        assert call_builtin("write_text_file", {"file_path": path, "content": "x"}).status == "succeeded"

    # when a path needing two new directories and a file (3 entries) is written, then it is refused
    deep = call_builtin("write_text_file", {"file_path": "x/y/z.txt", "content": "x"})
    assert deep.status == CallStatus.FAILED
    assert refusal(deep)["code"] == "quota"
    assert not (root / "acme" / "x").exists()

    # while one more entry fits, and then nothing new does, though an existing file may still be rewritten
    assert call_builtin("write_text_file", {"file_path": "dir/four.txt", "content": "x"}).status == "succeeded"
    assert call_builtin("write_text_file", {"file_path": "five.txt", "content": "x"}).status == CallStatus.FAILED
    assert call_builtin("write_text_file", {"file_path": "one.txt", "content": "y"}).status == "succeeded"
    assert tree(root / "acme") == ["dir", "dir/four.txt", "dir/three.txt", "one.txt", "two.txt"]


def test_a_workspace_past_a_lowered_limit_can_still_be_shrunk_but_not_grown(
    call_builtin: CallBuiltin, root: Path, settings: Any
) -> None:
    # given a workspace of 300 bytes, then an administrator lowers the limit to 100
    assert call_builtin("write_text_file", {"file_path": "big.txt", "content": "x" * 300}).status == "succeeded"
    settings.TOOLHUB = {**settings.TOOLHUB, "BUILTIN_WORKSPACE_MAX_BYTES": 100}

    # then the file may be overwritten with less (the model's way to make room), never with more
    assert call_builtin("write_text_file", {"file_path": "big.txt", "content": "x" * 10}).status == "succeeded"
    assert call_builtin("write_text_file", {"file_path": "big.txt", "content": "x" * 200}).status == "failed"
    assert (root / "acme" / "big.txt").read_text() == "x" * 10


@pytest.mark.usefixtures("small_workspaces")
def test_one_tenants_full_workspace_leaves_another_tenants_room(
    call_builtin: CallBuiltin, root: Path, globex_member: User
) -> None:
    assert call_builtin("write_text_file", {"file_path": "full.txt", "content": "a" * 100}).status == "succeeded"
    assert call_builtin("write_text_file", {"file_path": "more.txt", "content": "a"}).status == "failed"

    globex = call_builtin(
        "write_text_file", {"file_path": "g.txt", "content": "g" * 100}, tenant="globex", user=globex_member
    )

    assert globex.status == CallStatus.SUCCEEDED, globex.error
    assert (root / "globex" / "g.txt").read_text() == "g" * 100


@pytest.mark.usefixtures("small_workspaces")
def test_links_and_their_targets_outside_are_not_counted_as_the_workspace(
    call_builtin: CallBuiltin, root: Path, tmp_path: Path
) -> None:
    # given a symbolic link in the workspace (as a command might make) to a large directory outside it
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "huge.bin").write_bytes(b"x" * 10_000)
    call_builtin("list_directory", {})
    (root / "acme" / "link").symlink_to(outside)

    # then the link is one entry of no bytes, and a write still fits
    written = call_builtin("write_text_file", {"file_path": "note.txt", "content": "n" * 100})

    assert written.status == CallStatus.SUCCEEDED, written.error
