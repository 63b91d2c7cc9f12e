"""A tenant's workspace directory, and file access that cannot leave it.

Every path is relative to ``TOOLHUB["WORKSPACE_ROOT"]/<tenant slug>/`` and walked one component at a
time from a descriptor of that directory (``openat``-style, ``O_NOFOLLOW``): a symlink anywhere on
the way is refused rather than followed, so swapping a directory for a symlink between a check and
the open gains nothing. Writes go to a temporary file in the same directory and are renamed into
place (a rename replaces a symlink, never follows it), so a refused or failed write leaves nothing.
"""

import contextlib
import errno
import os
import re
import stat
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolhub.builtins.access import builtin_tenant
from toolhub.builtins.quota import room_problem
from toolhub.builtins.refusals import refuse
from toolhub.conf import toolhub_settings
from toolhub.exceptions import ToolError
from toolhub.storable import storable_text
from toolhub.tools.context import ToolContext

__all__ = ["Workspace", "WorkspaceEntry"]

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_DRIVE = re.compile(r"^[A-Za-z]:")
#: A repository's own directory (or a ``.git`` file naming one), compared case-folded.
_VCS_DIRECTORY = ".git"
#: The longest name one path component may have, in bytes (``NAME_MAX`` of Linux's file systems).
_NAME_MAX_BYTES = 255
#: How much of a file's name its temporary file's name keeps, in bytes (the rest is ``.<uuid>.tmp``).
_TEMPORARY_PREFIX_BYTES = 100


@dataclass(frozen=True)
class WorkspaceEntry:
    """One name in a listed directory: what it is, and a file's size."""

    name: str
    type: str
    size: int | None


class Workspace:
    """The calling tenant's workspace, for one call of one tool (refusals are audited under that call)."""

    def __init__(self, ctx: ToolContext, *, tool_name: str) -> None:
        self.ctx = ctx
        self.tool_name = tool_name
        tenant = builtin_tenant(ctx, tool_name=tool_name)
        configured = str(toolhub_settings().WORKSPACE_ROOT or "")
        if not configured:
            raise self._refused("not_configured", "File tools are not configured on this server; do not retry.")
        base = Path(configured)
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.root = base / tenant
        with contextlib.suppress(FileExistsError):
            self.root.mkdir(mode=0o700)
        self.max_bytes = toolhub_settings().BUILTIN_FILE_MAX_BYTES

    # Paths

    def parts(self, path: str, *, allow_root: bool = False, writing: bool = False) -> list[str]:
        """The components of a workspace-relative path; ``..``, absolute paths and NUL bytes are refused.

        ``writing``: a ``.git`` component is refused too, since git reads a repository's own configuration
        (``core.fsmonitor``, hooks, a ``.git`` file's ``gitdir:``) as commands to run.
        """
        if "\x00" in path:
            raise self._refused("nul_byte", "The path contains a NUL byte; it was refused.", path)
        if path.startswith(("/", "\\", "~")) or _DRIVE.match(path):
            raise self._refused("absolute", "Absolute paths are refused: give a path relative to the workspace.", path)
        parts = [part for part in path.split("/") if part not in ("", ".")]
        if ".." in parts:
            raise self._refused("traversal", "'..' is refused: paths stay inside the workspace.", path)
        if not parts and not allow_root:
            raise ToolError("Give the path of a file inside the workspace, not the workspace itself.")
        if any(len(os.fsencode(part)) > _NAME_MAX_BYTES for part in parts):
            # Checked here, not left to the open: an OSError would reach the model only as an "internal error".
            raise ToolError(
                f"A name in this path is too long: each part of a path may hold at most {_NAME_MAX_BYTES} bytes "
                "(in UTF-8). Use a shorter name."
            )
        if writing and any(part.casefold() == _VCS_DIRECTORY for part in parts):
            raise self._refused(
                "vcs_config", "Writing under '.git' is refused: git runs what its configuration there says.", path
            )
        return parts

    @contextlib.contextmanager
    def directory(self, parts: list[str], *, create: bool = False, path: str = "") -> Iterator[int]:
        """A descriptor of the directory ``parts`` name, walked without following any symlink."""
        fd = os.open(self.root, _DIRECTORY_FLAGS)
        try:
            for index, part in enumerate(parts):
                if create:
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o700, dir_fd=fd)
                try:
                    child = os.open(part, _DIRECTORY_FLAGS, dir_fd=fd)
                except OSError as exc:
                    self._refuse_os_error(exc, fd, part, path or "/".join(parts[: index + 1]))
                os.close(fd)
                fd = child
            yield fd
        finally:
            os.close(fd)

    def real_directory(self, path: str) -> str:
        """The absolute path of a directory inside the workspace (a command's working directory)."""
        parts = self.parts(path, allow_root=True)
        with self.directory(parts, path=path) as fd:
            real = os.readlink(f"/proc/self/fd/{fd}")
        if not Path(real).is_relative_to(self.root.resolve()):
            raise self._refused("escape", "The directory is outside the workspace; it was refused.", path)
        return real

    # Files

    def read_text(self, path: str) -> str:
        """A text file's content; special files, symlinks, binary and oversized files are refused."""
        parts = self.parts(path)
        with self.directory(parts[:-1], path=path) as parent, self._open_regular(parent, parts[-1], path) as fd:
            size = os.fstat(fd).st_size
            if size > self.max_bytes:
                raise self._too_large(path, size)
            data = _read_at_most(fd, self.max_bytes + 1)
        if len(data) > self.max_bytes:
            raise self._too_large(path, len(data))
        try:
            if b"\x00" in data:
                raise UnicodeDecodeError("utf-8", data, 0, 1, "NUL byte")
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise self._refused("binary", "The file is binary (not UTF-8 text); it cannot be viewed.", path) from None

    def write_text(self, path: str, text: str) -> int:
        """Create or replace a file with ``text`` in one rename, if the workspace has room; return the bytes written."""
        parts = self.parts(path, writing=True)
        data = text.encode("utf-8")
        if len(data) > self.max_bytes:
            raise self._too_large(path, len(data))
        problem = room_problem(self.root, parts, len(data))
        if problem:
            raise self._refused("quota", problem, path)
        with self.directory(parts[:-1], create=True, path=path) as parent:
            name = parts[-1]
            try:
                mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
            except FileNotFoundError:
                mode = None
            if mode is not None and not stat.S_ISREG(mode):
                self._refuse_special(mode, path)
            temporary = f".{_temporary_prefix(name)}.{uuid.uuid4().hex}.tmp"
            fd = os.open(
                temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=parent
            )
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                os.replace(temporary, name, src_dir_fd=parent, dst_dir_fd=parent)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary, dir_fd=parent)
                raise
        return len(data)

    def list(self, path: str) -> tuple[list[WorkspaceEntry], bool]:
        """The entries of a directory, sorted by name and bounded; whether some were left out."""
        parts = self.parts(path, allow_root=True)
        limit = toolhub_settings().BUILTIN_LIST_MAX_ENTRIES
        with self.directory(parts, path=path) as fd:
            names = sorted(os.listdir(fd))
            entries = []
            for name in names[:limit]:
                try:
                    info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                # A name that is not UTF-8 (an unpacked archive's) is shown escaped: as it is, no result could hold it.
                shown = storable_text(name)
                entries.append(
                    WorkspaceEntry(shown, _kind(info.st_mode), info.st_size if stat.S_ISREG(info.st_mode) else None)
                )
        return entries, len(names) > limit

    # Refusals

    @contextlib.contextmanager
    def _open_regular(self, parent: int, name: str, path: str) -> Iterator[int]:
        try:
            mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
        except FileNotFoundError:
            raise ToolError(f"There is no file {path!r} in the workspace.") from None
        if not stat.S_ISREG(mode):
            self._refuse_special(mode, path)
        # O_NONBLOCK: a FIFO swapped in after the check must not block the open; fstat then refuses it.
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent)
        except OSError as exc:
            self._refuse_os_error(exc, parent, name, path)
        try:
            opened = os.fstat(fd)
            if not stat.S_ISREG(opened.st_mode):
                self._refuse_special(opened.st_mode, path)
            if opened.st_nlink > 1:
                # Another name of the same file may sit outside the workspace; writes rename, reads would not see it.
                raise self._refused("hardlink", "The file has other hard links; it is refused.", path)
            yield fd
        finally:
            os.close(fd)

    def _refuse_os_error(self, exc: OSError, parent: int, name: str, path: str) -> Any:
        with contextlib.suppress(OSError):
            if stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
                exc = OSError(errno.ELOOP, "symlink")
        if exc.errno == errno.ELOOP:
            raise self._refused(
                "symlink", "The path goes through a symbolic link; links are not followed in the workspace.", path
            ) from None
        if exc.errno == errno.ENOENT:
            raise ToolError(f"There is no {path!r} in the workspace.") from None
        if exc.errno == errno.ENOTDIR:
            raise ToolError(f"{path!r}: a part of this path is a file, not a directory.") from None
        raise ToolError(f"{path!r} cannot be opened ({os.strerror(exc.errno or 0)}).") from None

    def _refuse_special(self, mode: int, path: str) -> Any:
        if stat.S_ISLNK(mode):
            raise self._refused(
                "symlink", "The path is a symbolic link; links are not followed in the workspace.", path
            )
        if stat.S_ISDIR(mode):
            raise ToolError(f"{path!r} is a directory, not a file.")
        raise self._refused("special_file", "Device files, FIFOs and sockets are refused.", path)

    def _too_large(self, path: str, size: int) -> ToolError:
        return self._refused(
            "too_large", f"{size} bytes is more than the {self.max_bytes} bytes a file may hold here.", path
        )

    def _refused(self, code: str, message: str, subject: Any = None) -> ToolError:
        return refuse(self.ctx, tool_name=self.tool_name, code=code, message=message, subject=subject)


def _temporary_prefix(name: str) -> str:
    """The start of ``name`` a temporary file's name keeps: bounded in bytes, so a long UTF-8 name still fits."""
    return os.fsdecode(os.fsencode(name)[:_TEMPORARY_PREFIX_BYTES])


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks, total = [], 0
    while total < limit:
        chunk = os.read(fd, min(65536, limit - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"
