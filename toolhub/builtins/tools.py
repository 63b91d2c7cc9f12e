"""The built-in tools (AgentScope's file and shell tools), registered only when this app is installed.

All are ``high`` risk (every call waits for an operator until one lowers a tool's risk in the
catalogue), in the ``builtins`` group, and run only for an explicit grant (``toolhub.builtins.access``).
"""

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import Field

from toolhub.builtins.refusals import refuse
from toolhub.builtins.shell import allow_list_problem, command_environment, run_command
from toolhub.builtins.workspace import Workspace
from toolhub.exceptions import ToolError
from toolhub.models import ToolCall
from toolhub.tools import Param, Risk, ToolContext, ToolOptions, tool

__all__ = [
    "BUILTIN_TOOLS",
    "execute_shell_command",
    "insert_text_file",
    "list_directory",
    "shell_needs_approval",
    "view_text_file",
    "write_text_file",
]

BUILTIN: ToolOptions = {"risk": Risk.HIGH, "group": "builtins", "category": "builtins"}

FilePath = Annotated[str, Param("Path of the file, relative to the workspace (e.g. 'notes/todo.md').")]
Line = Annotated[int, Field(ge=1)]


@tool(**BUILTIN)
def view_text_file(
    file_path: FilePath,
    ctx: ToolContext,
    start_line: Annotated[Line, Param("First line to show (1-based).")] = 1,
    end_line: Annotated[Line | None, Param("Last line to show; omit to read to the end.")] = None,
) -> str:
    """Show lines of a text file in the workspace, each prefixed with its number."""
    lines = Workspace(ctx, tool_name="view_text_file").read_text(file_path).splitlines()
    last = min(end_line or len(lines), len(lines))
    if lines and start_line > len(lines):
        raise ToolError(f"{file_path!r} has {len(lines)} lines; start_line must be at most that.")
    if start_line > last and lines:
        raise ToolError("end_line must not be before start_line.")
    return "\n".join(f"{number}: {lines[number - 1]}" for number in range(start_line, last + 1))


@tool(**BUILTIN)
def list_directory(
    ctx: ToolContext,
    path: Annotated[str, Param("Directory relative to the workspace; '.' is the workspace itself.")] = ".",
) -> dict[str, Any]:
    """List the files and directories in a workspace directory."""
    entries, truncated = Workspace(ctx, tool_name="list_directory").list(path)
    return {
        "path": path,
        "entries": [{"name": entry.name, "type": entry.type, "size": entry.size} for entry in entries],
        "truncated": truncated,
    }


@tool(**BUILTIN)
def write_text_file(
    file_path: FilePath,
    content: Annotated[str, Param("The text to write.")],
    ctx: ToolContext,
    start_line: Annotated[Line | None, Param("With end_line: replace these lines only (1-based).")] = None,
    end_line: Annotated[Line | None, Param("Last line replaced (inclusive).")] = None,
) -> str:
    """Create or overwrite a text file in the workspace, or replace a range of its lines."""
    workspace = Workspace(ctx, tool_name="write_text_file")
    if start_line is None and end_line is None:
        written = workspace.write_text(file_path, content)
        return f"Wrote {written} bytes to {file_path!r}."
    if start_line is None or end_line is None or end_line < start_line:
        raise ToolError("To replace lines give both start_line and end_line, with end_line >= start_line.")
    lines = workspace.read_text(file_path).splitlines(keepends=True)
    if start_line > len(lines):
        raise ToolError(f"{file_path!r} has {len(lines)} lines; start_line must be at most that.")
    replaced = _line_block(content)
    written = workspace.write_text(file_path, "".join([*lines[: start_line - 1], replaced, *lines[end_line:]]))
    return f"Replaced lines {start_line}-{min(end_line, len(lines))} of {file_path!r} ({written} bytes now)."


@tool(**BUILTIN)
def insert_text_file(
    file_path: FilePath,
    content: Annotated[str, Param("The text to insert.")],
    line_number: Annotated[Line, Param("Insert before this line (1-based); the line count + 1 appends.")],
    ctx: ToolContext,
) -> str:
    """Insert text into a text file of the workspace at a given line."""
    workspace = Workspace(ctx, tool_name="insert_text_file")
    lines = workspace.read_text(file_path).splitlines(keepends=True)
    if line_number > len(lines) + 1:
        raise ToolError(f"{file_path!r} has {len(lines)} lines; line_number must be at most {len(lines) + 1}.")
    if lines and not lines[-1].endswith("\n") and line_number == len(lines) + 1:
        lines[-1] += "\n"
    written = workspace.write_text(
        file_path, "".join([*lines[: line_number - 1], _line_block(content), *lines[line_number - 1 :]])
    )
    return f"Inserted at line {line_number} of {file_path!r} ({written} bytes now)."


def _line_block(content: str) -> str:
    return content if content.endswith("\n") or not content else content + "\n"


def shell_needs_approval(arguments: Mapping[str, Any], ctx: ToolContext) -> str | None:
    """A command off the allow list waits for an operator; the reason says what is off it."""
    problem = allow_list_problem(list(arguments.get("argv") or []))
    return f"{problem}: an operator must approve this command" if problem else None


@tool(risk=Risk.HIGH, group="builtins", category="builtins", needs_approval=shell_needs_approval, timeout=300)
def execute_shell_command(
    argv: Annotated[
        list[Annotated[str, Field(min_length=1)]],
        Field(min_length=1, max_length=100),
        Param("The command and its arguments, one item each (no shell: no pipes, globs or variables)."),
    ],
    ctx: ToolContext,
    cwd: Annotated[str, Param("Working directory relative to the workspace.")] = ".",
) -> dict[str, Any]:
    """Run a command in the workspace (listed commands run; others wait for an operator's approval)."""
    workspace = Workspace(ctx, tool_name="execute_shell_command")
    if any("\x00" in item for item in argv):
        raise refuse(
            ctx,
            tool_name="execute_shell_command",
            code="nul_byte",
            message="The command contains a NUL byte.",
            subject=argv,
        )
    problem = allow_list_problem(argv)
    if problem and not _approved(ctx):
        # Unreachable through the pipeline (the rule holds the call); kept so nothing off the list runs unapproved.
        raise refuse(ctx, tool_name="execute_shell_command", code="not_approved", message=f"{problem}; not run.")
    directory = workspace.real_directory(cwd)
    return run_command(argv, cwd=directory, env=command_environment(str(workspace.root))).as_result()


def _approved(ctx: ToolContext) -> bool:
    """Whether this call was approved by an operator (only a released approval leaves the binding set)."""
    call_id = ctx.call_id
    if not call_id:
        return False
    return ToolCall.objects.filter(id=call_id).exclude(approval_hash="").exists()


BUILTIN_TOOLS = [view_text_file, list_directory, write_text_file, insert_text_file, execute_shell_command]
