"""Checkpoint copies kept as files in ``AUDIT_CHECKPOINT_DIR``: named by number, written whole, never overwritten."""

import errno
import os
import re
from pathlib import Path

__all__ = ["file_name", "numbered_files", "write_copy"]


def write_copy(directory: Path, name: str, text: str) -> None:
    """Write a checkpoint's file whole or not at all, and never over an existing one.

    Written and synced under a temporary name, then linked to its own (which fails if it exists): a write
    cut short (a full disk) leaves no half file that would read as tampering.
    """
    directory.mkdir(parents=True, exist_ok=True)
    temporary = directory / f".{name}.{os.getpid()}.tmp"
    try:
        with temporary.open("w") as copy:
            copy.write(text)
            copy.flush()
            os.fsync(copy.fileno())
        try:
            os.link(temporary, directory / name)
        except OSError as exc:
            if exc.errno not in _NO_HARD_LINKS:
                raise
            _write_exclusively(directory / name, text)  # a share without hard links (SMB, FUSE mounts)
    finally:
        temporary.unlink(missing_ok=True)


#: What a file system without hard links answers to ``os.link``.
_NO_HARD_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV}


def _write_exclusively(path: Path, text: str) -> None:
    """Create ``path`` (never over an existing file), write and sync it; remove it if that fails midway."""
    descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    try:
        with os.fdopen(descriptor, "w") as copy:
            copy.write(text)
            copy.flush()
            os.fsync(copy.fileno())
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def numbered_files(directory: Path) -> dict[int, Path]:
    """The checkpoint copies of ``directory`` by number; other files (an export kept beside them) are not copies."""
    numbered = (_FILE_NAME.fullmatch(path.name) for path in directory.glob("audit-checkpoint-*.json"))
    return {int(match.group(1)): directory / match.group(0) for match in numbered if match}


_FILE_NAME = re.compile(r"audit-checkpoint-(\d{12})\.json")


def file_name(seq: int) -> str:
    return f"audit-checkpoint-{seq:012d}.json"
