"""How much a tenant's workspace holds, and whether one more write fits in what it may hold.

``BUILTIN_FILE_MAX_BYTES`` bounds one file; without a bound on the workspace a model could still fill the
disk every tenant's workers share, one file at a time. Before a file tool writes, the workspace is measured
(bytes of its regular files, and its entries: files, directories and anything else) and the write is refused
when the result would pass ``BUILTIN_WORKSPACE_MAX_BYTES`` or ``BUILTIN_WORKSPACE_MAX_ENTRIES``. Replacing
a file counts only the difference, and a write that adds neither bytes nor entries always fits. The walk goes
by descriptors, never follows a symbolic link, and stops as soon as a limit is passed. A workspace it cannot
measure whole (a directory deeper than ``MAX_DEPTH``, one it cannot open or list) is held at its size: it is
never counted short, and no write grows it. A file tool writes no path deeper than ``MAX_DEPTH`` directories, so
the tools alone never make one (the walk recursed once per level: a path of 1,000 made every later measure fail).

Two writes at once may both fit alone and pass the limit together by at most one file each; and a command the
shell tool runs is not measured while it runs. A hard bound needs the filesystem's own quota.
"""

import contextlib
import os
import stat
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from toolhub.conf import toolhub_settings

__all__ = ["MAX_DEPTH", "Unmeasurable", "Usage", "room_problem", "workspace_usage"]

#: The most directories a written path may go through, and the deepest the walk measures (one descriptor a level).
MAX_DEPTH = 64

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Unmeasurable(Exception):
    """The workspace cannot be measured whole: a directory is too deep, or could not be opened or listed."""


@dataclass(frozen=True)
class Usage:
    """What a workspace holds: bytes of its regular files, and its entries of every kind."""

    bytes: int
    entries: int

    def past(self, limit: "Usage") -> bool:
        return self.bytes > limit.bytes or self.entries > limit.entries


def workspace_limit() -> Usage:
    settings = toolhub_settings()
    return Usage(settings.BUILTIN_WORKSPACE_MAX_BYTES, settings.BUILTIN_WORKSPACE_MAX_ENTRIES)


def workspace_usage(root: Path, *, stop_past: Usage) -> Usage:
    """What ``root`` holds, counted without following links; counting stops once ``stop_past`` is passed.

    Raises ``Unmeasurable`` rather than leave out a directory it cannot open, list or reach within ``MAX_DEPTH``.
    """
    total = entries = 0
    # A generator (typeshed says Iterator): closing it closes the descriptors of the directories still open.
    walk = cast(
        Generator[tuple[str, list[str], list[str], int], None, None],
        os.fwalk(root, follow_symlinks=False, onerror=_unmeasurable),
    )
    try:
        for path, directories, files, directory_fd in walk:
            entries += len(directories) + len(files)
            if directories and len(Path(path).relative_to(root).parts) >= MAX_DEPTH:
                raise Unmeasurable(f"a directory deeper than {MAX_DEPTH} levels")
            for name in files:
                with contextlib.suppress(FileNotFoundError):
                    info = os.stat(name, dir_fd=directory_fd, follow_symlinks=False)
                    total += info.st_size if stat.S_ISREG(info.st_mode) else 0
            if Usage(total, entries).past(stop_past):
                break
    finally:
        walk.close()
    return Usage(total, entries)


def room_problem(root: Path, parts: list[str], size: int) -> str | None:
    """Why writing ``size`` bytes at the path ``parts`` would overfill the workspace, or ``None`` if it fits."""
    missing_directories, replaced = _path_as_it_is(root, parts)
    growth = Usage(size - (replaced or 0), missing_directories + (1 if replaced is None else 0))
    if growth.bytes <= 0 and growth.entries == 0:
        return None  # a workspace can always be shrunk, even one past a limit an administrator lowered
    if len(parts) - 1 > MAX_DEPTH:
        return f"A path may go through at most {MAX_DEPTH} directories; write it nearer the workspace's top."
    limit = workspace_limit()
    try:
        used = workspace_usage(root, stop_past=limit)
    except Unmeasurable as exc:
        return (
            f"The workspace cannot be measured ({exc}), so it may not grow; overwrite a file with less, or ask an "
            "administrator to tidy it."
        )
    if not Usage(used.bytes + growth.bytes, used.entries + growth.entries).past(limit):
        return None
    return (
        f"The workspace holds {used.bytes} bytes in {used.entries} files and directories; this write would take it "
        f"past its limit of {limit.bytes} bytes or {limit.entries} entries. Write less, or overwrite a file you "
        "no longer need with less; an administrator can raise the limit."
    )


def _unmeasurable(error: OSError) -> None:
    raise Unmeasurable(f"a directory that cannot be read: {os.strerror(error.errno or 0)}") from error


def _path_as_it_is(root: Path, parts: list[str]) -> tuple[int, int | None]:
    """How many of the path's directories do not exist yet, and the size of the file it replaces (``None``: new).

    Anything unusual on the way (a link, a file where a directory should be) counts as missing: the write's own
    walk refuses it with its proper reason.
    """
    fd = os.open(root, _DIRECTORY_FLAGS)
    try:
        for index, part in enumerate(parts[:-1]):
            try:
                child = os.open(part, _DIRECTORY_FLAGS, dir_fd=fd)
            except OSError:
                return len(parts) - 1 - index, None
            os.close(fd)
            fd = child
        try:
            info = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        except OSError:
            return 0, None
        return 0, info.st_size if stat.S_ISREG(info.st_mode) else None
    finally:
        os.close(fd)
