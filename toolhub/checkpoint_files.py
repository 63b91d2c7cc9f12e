"""Checkpoint copies kept as files in ``AUDIT_CHECKPOINT_DIR``: named by number, written whole, never overwritten."""

import re
from pathlib import Path

from toolhub.new_files import write_new

__all__ = ["file_name", "numbered_files", "write_copy"]


def write_copy(directory: Path, name: str, text: str) -> None:
    """Write a checkpoint's file whole or not at all, and never over an existing one (``toolhub.new_files``).

    A write cut short (a full disk) leaves no half file that would read as tampering.
    """
    directory.mkdir(parents=True, exist_ok=True)
    write_new(directory / name, text)


def numbered_files(directory: Path) -> dict[int, Path]:
    """The checkpoint copies of ``directory`` by number; other files (an export kept beside them) are not copies."""
    numbered = (_FILE_NAME.fullmatch(path.name) for path in directory.glob("audit-checkpoint-*.json"))
    return {int(match.group(1)): directory / match.group(0) for match in numbered if match}


_FILE_NAME = re.compile(r"audit-checkpoint-(\d{12})\.json")


def file_name(seq: int) -> str:
    return f"audit-checkpoint-{seq:012d}.json"
