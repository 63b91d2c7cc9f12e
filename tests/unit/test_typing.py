"""``mypy --strict`` (django-stubs, pyproject.toml) passes on the tool framework, and sees its options."""

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mypy-cache")


def _mypy(*arguments: str, cache_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cache_dir), *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_mypy_strict_passes_on_the_tool_framework(cache_dir: Path) -> None:
    # when mypy runs with the project's configuration ([tool.mypy]: strict, django-stubs, files = toolhub/tools)
    result = _mypy(cache_dir=cache_dir)

    # then it finds nothing
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found" in result.stdout


def test_mypy_sees_every_tool_option(cache_dir: Path, tmp_path: Path) -> None:
    # given code that misspells an option and gives options the wrong types
    user_code = tmp_path / "user_tools.py"
    user_code.write_text(
        textwrap.dedent(
            """
            from toolhub import Tool, tool

            @tool(retries=3)
            def pay(amount: int) -> None:
                \"\"\"Pay.\"\"\"

            @tool(risk="extreme")
            def refund(amount: int) -> None:
                \"\"\"Refund.\"\"\"

            Tool.create("x", "X.", None, lambda arguments: None, needs_approval="yes")
            Tool.external("y", "Y.", None, timeout="soon")
            """
        )
    )

    # when mypy checks it
    result = _mypy(str(user_code), cache_dir=cache_dir)

    # then each mistake is reported where it is made
    assert result.returncode == 1
    for line in (4, 8):  # @tool(retries=3), @tool(risk="extreme")
        assert re.search(rf'user_tools\.py:{line}: error: .*"tool".*\[call-overload\]', result.stdout), result.stdout
    assert 'Argument "needs_approval" to "create" of "Tool" has incompatible type "str"' in result.stdout
    assert 'Argument "timeout" to "external" of "Tool" has incompatible type "str"' in result.stdout
