"""The shell tool's rules: which argv the allow list lets run unattended, and how a command is run.

A command is an argv list run without a shell (no interpolation, globbing or redirection), found on
a fixed ``PATH``, in the tenant's workspace, with a minimal environment (nothing from the server's),
a time limit (its whole process group is killed) and a cap on the output kept.

``HOME`` is an empty, read-only directory outside every workspace, and per-user and system configuration
is switched off: a file the file tools write is never read as a command's own configuration (a planted
``.gitconfig`` would make a listed ``git status`` run any command).
"""

import os
import re
import selectors
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from toolhub.conf import toolhub_settings
from toolhub.exceptions import ToolError
from toolhub.storable import storable_text

__all__ = ["CommandOutput", "allow_list_problem", "run_command", "command_environment"]


@dataclass(frozen=True)
class _Allowed:
    command: str
    patterns: tuple[re.Pattern[str], ...]
    max_arguments: int


@lru_cache(maxsize=8)
def _compiled(entries: str) -> dict[str, _Allowed]:
    import json

    allowed = {}
    for entry in json.loads(entries):
        patterns = tuple(re.compile(pattern) for pattern in entry.get("arguments", ()))
        allowed[entry["command"]] = _Allowed(entry["command"], patterns, int(entry.get("max_arguments", 20)))
    return allowed


def _allow_list() -> dict[str, _Allowed]:
    import json

    return _compiled(json.dumps(list(toolhub_settings().SHELL_COMMANDS), sort_keys=True))


def allow_list_problem(argv: Sequence[str]) -> str | None:
    """Why ``argv`` is not on the allow list (so it needs an operator's approval), or ``None`` when it is.

    The command must be listed by name, and every argument must match, whole, one of its patterns.
    """
    if not argv:
        return "an empty command"
    allowed = _allow_list().get(argv[0])
    if allowed is None:
        return f"command {argv[0][:100]!r} is not on the shell allow list"
    arguments = list(argv[1:])
    if len(arguments) > allowed.max_arguments:
        return f"command {allowed.command!r} takes at most {allowed.max_arguments} arguments on the allow list"
    for position, argument in enumerate(arguments, start=1):
        if any(_leaves_workspace(path) for path in _paths_in(argument)):
            # Whatever the patterns say: a path leaving the workspace is for an operator to allow.
            return f"argument {position} of {allowed.command!r} names a path outside the workspace"
        if not any(pattern.fullmatch(argument) for pattern in allowed.patterns):
            return f"argument {position} of {allowed.command!r} matches none of its allowed patterns"
    return None


def _paths_in(argument: str) -> tuple[str, ...]:
    """Where a path may stand in one argument: all of it, after an option's ``=``, after short options, ``@``, a URL.

    ``--file=/etc/passwd`` and ``if=/dev/sda``; ``-f/etc/passwd`` and a cluster of short options (``tar -xf/etc/x``:
    getopt gives the rest of the argument to whichever letter takes a value); curl's ``@/etc/passwd``; a ``file:``
    URL (``curl file:///etc/passwd``), whose path is the server's.
    """
    paths = [argument]
    if "=" in argument:
        paths.append(argument.split("=", 1)[1])
    cluster = _SHORT_OPTIONS.match(argument)
    if cluster:
        paths += [argument[end:] for end in range(2, cluster.end() + 1)]
    if argument.startswith("@"):
        paths.append(argument[1:])
    if argument[:5].casefold() == "file:":
        paths.append("/")  # a local file by URL: never a path inside the workspace
    return tuple(paths)


#: A cluster of short options (``-xvf``): any letter of it may take the rest of the argument as its value.
_SHORT_OPTIONS = re.compile(r"-[A-Za-z0-9]+")


def _leaves_workspace(path: str) -> bool:
    return path.startswith(("/", "~")) or ".." in path.split("/")


def command_environment(workspace: str) -> dict[str, str]:
    """The whole environment a command gets in the tenant's ``workspace``: a fixed PATH, a locale, nothing writable.

    HOME (and where XDG, curl look) is an empty directory no tool writes; git and wget read no user or system
    file, and git takes no directory for a bare repository unless told. What a command reads from its working
    directory (a repository's ``.git/config``) is not covered here: the file tools refuse to write under ``.git``.
    git looks for a repository no higher than the workspace: above it is ``WORKSPACE_ROOT``, often inside the
    deployment's own checkout, whose files and history are the server's.
    """
    workspaces = str(Path(workspace).resolve().parent)
    home = empty_home(outside=workspaces)
    return {
        "PATH": toolhub_settings().SHELL_PATH,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": home,
        "XDG_CONFIG_HOME": home,
        "CURL_HOME": home,
        "WGETRC": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CEILING_DIRECTORIES": workspaces,
        "GIT_CONFIG_GLOBAL": os.devnull,
        # Command-line scope: a directory the file tools filled with HEAD, config, refs/ is not taken for a repository.
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "safe.bareRepository",
        "GIT_CONFIG_VALUE_0": "explicit",
    }


_home_lock = threading.Lock()
_home: list[str] = []


def empty_home(*, outside: str) -> str:
    """An empty directory, mode 0o500, made by toolhub in the temporary directory: ``HOME`` for every command.

    Checked before each use, and replaced if anything was written into it or it is not toolhub's any more.
    A name starting with a dot is never a tenant's directory, even with ``WORKSPACE_ROOT`` in that directory.
    """
    with _home_lock:
        if not (_home and _is_empty_home(_home[-1], outside)):
            made = tempfile.mkdtemp(prefix=".toolhub-home-")
            os.chmod(made, 0o500)
            _home[:] = [made]
        if not _is_empty_home(_home[-1], outside):
            raise ToolError("No empty home directory could be made for the command; it was not run.")
        return _home[-1]


def _is_empty_home(path: str, outside: str) -> bool:
    """Whether ``path`` is still a directory of this process's user, read-only, empty, not in ``outside``."""
    try:
        info = os.lstat(path)
        entries = os.listdir(path)
    except OSError:
        return False
    real = Path(path).resolve()
    return (
        stat.S_ISDIR(info.st_mode)
        and stat.S_IMODE(info.st_mode) == 0o500
        and info.st_uid == os.geteuid()
        and not entries
        and not real.is_relative_to(Path(outside).resolve())
    )


@dataclass(frozen=True)
class CommandOutput:
    """What a finished command left: its exit code and its output, each capped."""

    exit_code: int
    stdout: str
    stderr: str
    truncated: bool

    def as_result(self) -> dict[str, Any]:
        """The tool's JSON result."""
        return {"exit_code": self.exit_code, "stdout": self.stdout, "stderr": self.stderr, "truncated": self.truncated}


def run_command(argv: Sequence[str], *, cwd: str, env: Mapping[str, str]) -> CommandOutput:
    """Run ``argv`` (never through a shell); raise ``ToolError`` if it cannot start or runs out of time."""
    executable = shutil.which(argv[0], path=env["PATH"]) if "/" not in argv[0] else None
    if executable is None:
        raise ToolError(f"Command {argv[0][:100]!r} is not installed on this server's PATH.")
    timeout = min(toolhub_settings().SHELL_TIMEOUT_SECONDS, 290.0)
    cap = toolhub_settings().SHELL_OUTPUT_MAX_BYTES
    process = subprocess.Popen(  # noqa: S603 - argv, no shell; the allow list or an operator admitted it
        [executable, *argv[1:]],
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        shell=False,
        start_new_session=True,  # its own process group, so a timeout kills what it started too
        close_fds=True,
    )
    try:
        streams, timed_out = _collect(process, timeout=timeout, cap=cap)
    finally:
        _kill_group(process)
    if timed_out:
        raise ToolError(f"The command did not finish within {timeout:g} s and was stopped; its output is not shown.")
    stdout, stdout_cut = _capped_text(streams[0], cap)
    stderr, stderr_cut = _capped_text(streams[1], cap)
    return CommandOutput(process.returncode, stdout, stderr, stdout_cut or stderr_cut)


def _collect(process: subprocess.Popen[bytes], *, timeout: float, cap: int) -> tuple[list[tuple[bytes, int]], bool]:
    """Read both pipes until they close: at most ``cap`` bytes kept of each, the rest counted and dropped."""
    assert process.stdout is not None and process.stderr is not None
    order = [process.stdout.fileno(), process.stderr.fileno()]
    kept = {fd: bytearray() for fd in order}
    dropped = dict.fromkeys(order, 0)
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        for fd in order:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return [], True
            for key, _ in selector.select(timeout=left):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                room = max(cap - len(kept[key.fd]), 0)
                kept[key.fd].extend(chunk[:room])
                dropped[key.fd] += max(len(chunk) - room, 0)
    try:
        process.wait(timeout=max(deadline - time.monotonic(), 0.01))
    except subprocess.TimeoutExpired:
        return [], True
    return [(bytes(kept[fd]), dropped[fd]) for fd in order], False


def _capped_text(stream: tuple[bytes, int], cap: int) -> tuple[str, bool]:
    data, dropped = stream
    # Invalid UTF-8 becomes U+FFFD; a NUL byte (a binary file, ``-print0``) is written out, or no result could hold it.
    text = storable_text(data.decode("utf-8", errors="replace"))
    if not dropped:
        return text, False
    return f"{text}\n[output truncated at {cap} bytes: {dropped} more bytes not shown]", True


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """Kill the command's process group (whatever it left running), then reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            stream.close()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be refused
        pass
