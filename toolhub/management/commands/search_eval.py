"""``manage.py search_eval``: measure a tool-search provider on a labeled catalogue and query set."""

import json
from typing import Any

from django.core.management.base import CommandError

from toolhub.exceptions import ToolhubError
from toolhub.operator_command import OperatorCommand
from toolhub.search.base import get_provider
from toolhub.search.evaluation import EvaluationInputError, evaluate, load_catalogue, load_queries


class Command(OperatorCommand):
    help = (
        "Load a catalogue (JSON list of {name, description, category, tags, parameters}) into a tool-search "
        "provider, run labeled queries (JSON list of {query, expected: [names]}) and print recall@1/3/5, MRR "
        "and p50/p95 latency as JSON."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--catalogue", required=True, help="JSON file of the tools to index.")
        parser.add_argument("--queries", required=True, help="JSON file of the labeled queries.")
        parser.add_argument("--provider", help="Provider name or dotted path (default: TOOL_SEARCH_PROVIDER).")
        parser.add_argument("--k", type=int, default=5, help="Results asked per query (default 5).")
        parser.add_argument("--misses", action="store_true", help="Also list the queries not found within k.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["k"] < 1:
            raise CommandError(f"--k must be at least 1, not {options['k']}.")
        try:
            documents = load_catalogue(options["catalogue"])
            queries = load_queries(options["queries"], [document.name for document in documents])
        except EvaluationInputError as exc:
            raise CommandError(str(exc)) from None
        try:
            provider = get_provider(options["provider"])
        except (LookupError, ImportError, ToolhubError) as exc:
            raise CommandError(f"Cannot use the tool-search provider: {exc}") from None
        report = evaluate(provider, documents, queries, k=options["k"], misses=options["misses"])
        self.stdout.write(json.dumps(report, ensure_ascii=False, indent=2))
