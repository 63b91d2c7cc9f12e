import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

DATA = Path(__file__).resolve().parents[1] / "data"
CATALOGUE = DATA / "tool_search_catalogue.json"
QUERIES = DATA / "tool_search_queries.json"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    call_command("search_eval", *args)
    return json.loads(capsys.readouterr().out)


def write(tmp_path: Path, name: str, content: Any) -> str:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return str(path)


@pytest.fixture
def small(tmp_path: Path) -> tuple[str, str]:
    catalogue = write(
        tmp_path,
        "catalogue.json",
        [
            {"name": "send_email", "description": "Send an email.", "category": "mail", "tags": [], "parameters": {}},
            {"name": "resize_image", "description": "Scale a picture.", "category": "files", "tags": ["images"]},
        ],
    )
    queries = write(
        tmp_path,
        "queries.json",
        [
            {"query": "mail my boss", "expected": ["send_email"]},
            {"query": "nothing matches", "expected": ["resize_image"]},
        ],
    )
    return catalogue, queries


def test_prints_recall_mrr_and_latency_as_json(capsys: pytest.CaptureFixture[str], small: tuple[str, str]) -> None:
    catalogue, queries = small
    report = run(capsys, "--catalogue", catalogue, "--queries", queries, "--provider", "lexical", "--k", "3")
    assert report["provider"] == "lexical"
    assert (report["tools"], report["queries"]) == (2, 2)
    # one of two queries found, at rank 1
    assert report["recall@1"] == report["recall@3"] == report["recall@5"] == 0.5
    assert report["mrr"] == 0.5
    assert report["latency_ms_p50"] >= 0 and report["latency_ms_p95"] >= report["latency_ms_p50"]


def test_misses_lists_the_queries_not_found(capsys: pytest.CaptureFixture[str], small: tuple[str, str]) -> None:
    catalogue, queries = small
    report = run(capsys, "--catalogue", catalogue, "--queries", queries, "--misses")
    assert [miss["query"] for miss in report["misses"]] == ["nothing matches"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not JSON"),
        ({"name": "x"}, "non-empty JSON list"),
        ([], "non-empty JSON list"),
        (["send_email"], "must be an object"),
        ([{"description": "no name"}], "'name' must be a non-empty string"),
        ([{"name": "a", "tags": "x"}], "'tags' must be a list of strings"),
        ([{"name": "a", "parameters": ["x"]}], "'parameters' must map"),
        ([{"name": "a"}, {"name": "a"}], "appears twice"),
    ],
)
def test_a_bad_catalogue_is_a_clear_error(tmp_path: Path, small: tuple[str, str], content: Any, message: str) -> None:
    catalogue = write(tmp_path, "bad.json", content)
    with pytest.raises(CommandError, match=message) as caught:
        call_command("search_eval", "--catalogue", catalogue, "--queries", small[1])
    assert "bad.json" in str(caught.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "is not JSON"),
        ([{"query": "x"}], "'expected' must be a non-empty list"),
        ([{"query": "x", "expected": []}], "'expected' must be a non-empty list"),
        ([{"query": "", "expected": ["send_email"]}], "'query' must be a non-empty string"),
        ([{"query": "x", "expected": ["send_email", "fly_to_mars"]}], "not in the catalogue: fly_to_mars"),
    ],
)
def test_bad_queries_are_a_clear_error(tmp_path: Path, small: tuple[str, str], content: Any, message: str) -> None:
    queries = write(tmp_path, "badq.json", content)
    with pytest.raises(CommandError, match=message):
        call_command("search_eval", "--catalogue", small[0], "--queries", queries)


def test_missing_files_unknown_provider_and_bad_k(tmp_path: Path, small: tuple[str, str]) -> None:
    catalogue, queries = small
    with pytest.raises(CommandError, match="does not exist"):
        call_command("search_eval", "--catalogue", str(tmp_path / "none.json"), "--queries", queries)
    with pytest.raises(CommandError, match="Unknown tool search provider 'nosuch'"):
        call_command("search_eval", "--catalogue", catalogue, "--queries", queries, "--provider", "nosuch")
    with pytest.raises(CommandError, match="--k must be at least 1"):
        call_command("search_eval", "--catalogue", catalogue, "--queries", queries, "--k", "0")
