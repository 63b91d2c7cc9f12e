"""Settings of the worker in tests/integration/test_builtins_worker.py: the built-in tools installed."""

import os

from tests.builtins.allowlist import SHELL_COMMANDS
from tests.settings import *  # noqa: F403

INSTALLED_APPS = [*INSTALLED_APPS, "toolhub.builtins.apps.BuiltinsConfig"]  # noqa: F405
TOOLHUB = {  # noqa: F405
    **TOOLHUB,  # noqa: F405
    "WORKSPACE_ROOT": os.environ.get("TOOLHUB_TEST_WORKSPACE_ROOT", ""),
    "SHELL_COMMANDS": SHELL_COMMANDS,
    "SHELL_TIMEOUT_SECONDS": 1,
    "SHELL_OUTPUT_MAX_BYTES": 1000,
}
