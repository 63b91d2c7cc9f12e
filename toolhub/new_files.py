"""Files a command writes for an operator (``-o FILE``): refused up front, written whole, never over a file.

An operator who names an existing file (an earlier checkpoint kept elsewhere), a directory or a missing folder
learns it before anything is signed or recorded, and a write cut short (a full disk) leaves no half file.
"""

import errno
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

__all__ = ["new_file_refusal", "write_new"]


def new_file_refusal(path: Path) -> str | None:
    """Why ``path`` cannot be written as a new file (it exists, or its folder does not), or None."""
    if path.exists() or path.is_symlink():
        return f"{path} exists (a file is never overwritten)"
    if not path.parent.is_dir():
        return f"{path.parent} is not a directory"
    return None


def write_new(path: Path, content: str | Iterable[str]) -> None:
    """Write ``path`` whole or not at all, and never over an existing file (``FileExistsError``).

    ``content`` is the text, or its pieces as they are produced (an export streamed from the database).
    Written and synced under a temporary name beside it, then linked to its own (which fails if it exists).
    """
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    temporary = Path(name)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as copy:
            for piece in [content] if isinstance(content, str) else content:
                copy.write(piece)
            copy.flush()
            os.fsync(copy.fileno())
        try:
            os.link(temporary, path)
        except OSError as exc:
            if exc.errno not in _NO_HARD_LINKS:
                raise
            _copy_exclusively(temporary, path)  # a share without hard links (SMB, FUSE mounts)
    finally:
        temporary.unlink(missing_ok=True)


#: What a file system without hard links answers to ``os.link``.
_NO_HARD_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV}


def _copy_exclusively(source: Path, path: Path) -> None:
    """Create ``path`` (never over an existing file) as a synced copy of ``source``; remove it if that fails."""
    descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    try:
        with os.fdopen(descriptor, "wb") as copy, source.open("rb") as original:
            shutil.copyfileobj(original, copy)
            copy.flush()
            os.fsync(copy.fileno())
    except BaseException:
        path.unlink(missing_ok=True)
        raise
