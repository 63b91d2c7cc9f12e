"""Files a command writes for an operator (``-o FILE``): refused up front, written whole, never over a file.

An operator who names an existing file (an earlier checkpoint kept elsewhere), a directory or a missing folder
learns it before anything is signed or recorded, and a write cut short (a full disk) leaves no half file.
"""

import errno
import os
from pathlib import Path

__all__ = ["new_file_refusal", "write_new"]


def new_file_refusal(path: Path) -> str | None:
    """Why ``path`` cannot be written as a new file (it exists, or its folder does not), or None."""
    if path.exists() or path.is_symlink():
        return f"{path} exists (a file is never overwritten)"
    if not path.parent.is_dir():
        return f"{path.parent} is not a directory"
    return None


def write_new(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all, and never over an existing file (``FileExistsError``).

    Written and synced under a temporary name, then linked to its own (which fails if it exists).
    """
    temporary = path.parent / f".{path.name}.{os.getpid()}.tmp"
    try:
        with temporary.open("w") as copy:
            copy.write(text)
            copy.flush()
            os.fsync(copy.fileno())
        try:
            os.link(temporary, path)
        except OSError as exc:
            if exc.errno not in _NO_HARD_LINKS:
                raise
            _write_exclusively(path, text)  # a share without hard links (SMB, FUSE mounts)
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
