"""Where an ASGI request goes, read below the server's mount prefix (``uvicorn --root-path``)."""

from typing import Any

__all__ = ["route_path"]


def route_path(scope: Any) -> str:
    """The request's path below the server's ``root_path`` (``uvicorn --root-path``), as Starlette and Django read it.

    ASGI servers put the mount prefix in ``path`` too (``/toolhub/mcp``), so ``/mcp`` (and ``/api/``) are matched on
    what follows it.
    """
    path: str = scope["path"]
    root_path: str = scope.get("root_path", "")
    if root_path and path.startswith(root_path) and path[len(root_path) : len(root_path) + 1] in ("", "/"):
        return path[len(root_path) :]
    return path
