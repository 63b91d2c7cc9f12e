"""The operator and auditor console at scale: page renders, a streaming export and verify_audit.

``python -m benchmarks.console_bench`` (``make bench-console``) uses a database of its own,
``toolhub_console_bench`` (``--database``), which it creates, migrates and fills with
``generate_calls`` when it holds fewer calls than ``--calls`` (1,000,000 by default, about 4M audit
events; that takes minutes once); the database is kept between runs. ``verify_audit`` is measured on a
second kept database holding about ``--verify-events`` events (1,000,000), against the previous
implementation (one process, a model instance per event) run in the same run as the baseline.

Measured, as a tenant-scoped auditor (one of two tenants), median of warm renders through Django's
test client (no network): the approval queue, the tool-call change list with one filter, the audit
event change list, one call's page with its re-verified timeline, and the API's call list (cursor
pagination) for reference; the CSV export of about 100,000 calls (rows/s and the peak RSS growth while
streaming). Writes ``benchmarks/results/console.md`` with the date and the load average.
"""

import argparse
import datetime as dt
import math
import os
import secrets
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
SERVER = os.environ.get("BENCH_DATABASE_SERVER", "postgres://postgres@127.0.0.1:5432")
ROUNDS = 7


def _environment(database: str) -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": f"{SERVER}/{database}",
        "DJANGO_SETTINGS_MODULE": "toolhub.settings",
        "TOOLHUB_DEMO": "1",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": os.environ.get("DJANGO_SECRET_KEY") or secrets.token_urlsafe(50),
        "DJANGO_ALLOWED_HOSTS": "testserver,127.0.0.1,localhost",
        # The test client speaks plain http; TLS is not what is measured.
        "DJANGO_SECURE_SSL_REDIRECT": "0",
        "DJANGO_SECURE_COOKIES": "0",
        "DEMO_NOTIFY_API_KEY": "bench-placeholder",
    }


def _manage(database: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=_environment(database),
        check=True,
        capture_output=True,
        text=True,
    )


def _ensure_database(database: str) -> None:
    import psycopg

    with psycopg.connect(f"{SERVER}/postgres", autocommit=True) as connection:
        exists = connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [database]).fetchone()
        if not exists:
            connection.execute(f'CREATE DATABASE "{database}"')
            print(f"created database {database}", flush=True)
    _manage(database, "migrate", "--noinput", "-v0")
    _manage(database, "sync_tools")


def _calls_in(database: str) -> int:
    import psycopg

    with psycopg.connect(f"{SERVER}/{database}") as connection:
        row = connection.execute("SELECT count(*) FROM toolhub_toolcall").fetchone()
    return int(row[0]) if row else 0


def _fill(database: str, calls: int) -> int:
    """Top the database up to ``calls`` calls with generate_calls; return how many it holds."""
    present = _calls_in(database)
    if present < calls:
        missing = calls - present
        print(f"{database}: generating {missing} calls (kept for the next runs) ...", flush=True)
        started = time.monotonic()
        _manage(database, "generate_calls", str(missing), "--tenants", "acme,globex", "--seed", str(present + 1))
        print(f"  done in {time.monotonic() - started:.0f} s", flush=True)
        _vacuum(database)
    return _calls_in(database)


def _vacuum(database: str) -> None:
    import psycopg

    with psycopg.connect(f"{SERVER}/{database}", autocommit=True) as connection:
        connection.execute("VACUUM ANALYZE")


def _load() -> str:
    return "/".join(f"{value:.2f}" for value in os.getloadavg())


def _rss_kb() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


# --- in-process measurements on the console database ---------------------------------------------------


def _setup_django(database: str) -> None:
    os.environ.update(_environment(database))
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def _users() -> tuple[Any, Any]:
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command

    from toolhub.models import Tenant, TenantMembership

    call_command("toolhub_roles", verbosity=0)
    auditor, _ = User.objects.get_or_create(username="bench-auditor", defaults={"is_staff": True})
    auditor.groups.add(Group.objects.get(name="auditors"))
    TenantMembership.objects.get_or_create(user=auditor, tenant=Tenant.objects.get(slug="acme"))
    operator, _ = User.objects.get_or_create(username="bench-operator", defaults={"is_staff": True})
    operator.groups.add(Group.objects.get(name="operators"))
    TenantMembership.objects.get_or_create(user=operator, tenant=Tenant.objects.get(slug="acme"))
    return auditor, operator


def _approval_requests() -> int:
    """An approval request for each synthetic call left pending, as the pipeline would have made."""
    from django.utils import timezone

    from approvals.models import ApprovalRequest
    from toolhub.models import CallStatus, ToolCall

    if ApprovalRequest.objects.exists():
        return ApprovalRequest.objects.filter(status="pending").count()
    pending = ToolCall.objects.filter(status=CallStatus.PENDING_APPROVAL).values_list(
        "id", "tool_name", "tenant", "agent_name", "arguments"
    )
    expires = timezone.now() + dt.timedelta(days=365)
    batch = [
        ApprovalRequest(
            call_id=call_id,
            reason="risk is high",
            tool_name=tool_name,
            risk="high",
            tenant=tenant,
            agent_name=agent_name,
            source="risk",
            original_arguments=arguments,
            arguments=arguments,
            expires_at=expires,
        )
        for call_id, tool_name, tenant, agent_name, arguments in pending.iterator(chunk_size=5000)
    ]
    ApprovalRequest.objects.bulk_create(batch, batch_size=2000)
    return len(batch)


def _median_ms(client: Any, url: str) -> tuple[float, int]:
    for _ in range(2):
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
    timings = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        response = client.get(url)
        timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings), len(response.content)


def _renders(auditor: Any, operator: Any) -> list[tuple[str, str, float, str]]:
    from django.test import Client

    from toolhub.models import ToolCall

    client = Client()
    client.force_login(auditor)
    approver = Client()
    approver.force_login(operator)
    call = ToolCall.objects.filter(tenant="acme").order_by("-created_at").only("id")[500]
    tool = ToolCall.objects.filter(tenant="acme").only("tool_name").first().tool_name
    call_page = f"/admin/toolhub/toolcall/{call.pk}/change/"
    pages = [
        (
            "approval queue (pending, operator)",
            approver,
            "/admin/approvals/approvalrequest/?status__exact=pending",
            "<= 300 ms",
        ),
        ("tool-call change list, status filter", client, "/admin/toolhub/toolcall/?status__exact=failed", "<= 300 ms"),
        ("tool-call change list, tool filter", client, f"/admin/toolhub/toolcall/?tool={tool}", "<= 300 ms"),
        ("tool-call change list, search by call id", client, f"/admin/toolhub/toolcall/?q={call.pk}", "<= 300 ms"),
        ("tool-call change list, unfiltered", client, "/admin/toolhub/toolcall/", "<= 300 ms"),
        ("audit event change list", client, "/admin/toolhub/auditevent/", "<= 300 ms"),
        (
            "audit event change list, event type filter",
            client,
            "/admin/toolhub/auditevent/?event_type=call.failed",
            "<= 300 ms",
        ),
        ("one call's page with its verified timeline", client, call_page, "<= 100 ms"),
        ("admin index with the dashboard", client, "/admin/", "measured"),
        ("API call list, status filter (reference)", client, "/api/v1/calls/?status=failed", "keep 4-16 ms"),
    ]
    rows = []
    for name, who, url, goal in pages:
        median, size = _median_ms(who, url)
        rows.append((name, url, median, goal))
        print(f"  {name}: {median:.1f} ms ({size} bytes)", flush=True)
    return rows


def _export(auditor: Any, target: int) -> dict[str, Any]:
    """Stream a CSV export of about ``target`` calls of the auditor's tenant; rows/s and peak RSS growth."""
    from django.test import Client
    from django.utils import timezone

    from toolhub.models import ToolCall

    newest = ToolCall.objects.filter(tenant="acme").order_by("-created_at").values_list("created_at", flat=True).first()
    oldest = ToolCall.objects.filter(tenant="acme").order_by("created_at").values_list("created_at", flat=True).first()
    total = ToolCall.objects.filter(tenant="acme").count()
    span_days = max(1, (newest - oldest).days)
    days = math.ceil(target / max(1, total / span_days)) + 1  # the newest day is partial
    start = (timezone.localtime(newest) - dt.timedelta(days=days - 1)).date()
    client = Client()
    client.force_login(auditor)
    url = f"/admin/toolhub/toolcall/export/csv/?tenant=acme&created_from={start}"
    rss_before = peak = _rss_kb()
    started = time.perf_counter()
    response = client.post(url)
    lines = size = 0
    for index, chunk in enumerate(response.streaming_content):
        lines += chunk.count(b"\n")
        size += len(chunk)
        if index % 20 == 0:
            peak = max(peak, _rss_kb())
    elapsed = time.perf_counter() - started
    peak = max(peak, _rss_kb())
    rows = lines - 1
    print(
        f"  export: {rows} rows in {elapsed:.2f} s ({rows / elapsed:,.0f} rows/s), RSS +{peak - rss_before} KB",
        flush=True,
    )
    return {"rows": rows, "seconds": elapsed, "rate": rows / elapsed, "rss_growth_kb": peak - rss_before, "bytes": size}


# --- verify_audit on its own database -----------------------------------------------------------------


def _timed(command: list[str], database: str) -> tuple[float, str, int]:
    """Wall time, first output line and peak RSS (KB, from GNU time; 0 without it) of one command."""
    gnu_time = "/usr/bin/time"
    measured = [gnu_time, "-f", "maxrss=%M", *command] if os.path.exists(gnu_time) else command
    started = time.monotonic()
    done = subprocess.run(measured, cwd=ROOT, env=_environment(database), capture_output=True, text=True)
    elapsed = time.monotonic() - started
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")
    peaks = [line for line in done.stderr.splitlines() if line.startswith("maxrss=")]
    return elapsed, done.stdout.strip().splitlines()[0], int(peaks[-1].split("=")[1]) if peaks else 0


def legacy_verify() -> None:
    """The previous verify_audit_chains: one process, batches of model instances (the baseline)."""
    import django

    django.setup()
    from toolhub.audit_hash import compute_hash
    from toolhub.models import AuditChainHead, AuditEvent

    checked = problems = 0
    heads = {head.chain: head for head in AuditChainHead.objects.all()}
    chains = set(heads) | set(AuditEvent.objects.values_list("chain", flat=True).distinct())
    for chain in sorted(chains):
        last_seq, expected, prev_hash = 0, 1, ""
        while True:
            batch = list(AuditEvent.objects.filter(chain=chain, seq__gt=last_seq).order_by("seq")[:2000])
            if not batch:
                break
            for event in batch:
                checked += 1
                if event.seq != expected or event.prev_hash != prev_hash or compute_hash(event) != event.hash:
                    problems += 1
                expected, prev_hash = event.seq + 1, event.hash
            last_seq = batch[-1].seq
    print(f"legacy verify: {checked} events, {problems} problems")


def _verify(database: str, events: int) -> dict[str, Any]:
    _ensure_database(database)
    _fill(database, max(1, round(events / 3.85)))
    python = sys.executable
    legacy = _timed([python, "-m", "benchmarks.console_bench", "--legacy-verify"], database)
    print(f"  verify baseline (previous code): {legacy[0]:.1f} s; {legacy[1]}", flush=True)
    workers = min(os.cpu_count() or 1, 8)
    parallel = _timed([python, "manage.py", "verify_audit", "--no-progress", "--workers", str(workers)], database)
    print(f"  verify_audit --workers {workers}: {parallel[0]:.1f} s; {parallel[1]}", flush=True)
    return {"legacy": legacy, "parallel": parallel, "workers": workers}


def _write(report: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / "console.md"
    verify = report["verify"]
    lines = [
        "# Console at scale",
        "",
        f"Run {report['date']} on {os.cpu_count()} cores; load average {report['load_start']} at the start, "
        f"{report['load_end']} at the end. Console database: {report['calls']:,} calls, {report['events']:,} audit "
        f"events, {report['pending']:,} pending approval requests; pages rendered as a tenant-scoped auditor "
        f"(tenant acme, about half the rows) through Django's test client, median of {ROUNDS} warm renders.",
        "Command: `python -m benchmarks.console_bench`.",
        "",
        "| figure | measured | goal |",
        "| --- | --- | --- |",
    ]
    lines += [f"| {name} (`{url}`) | {median:.0f} ms | {goal} |" for name, url, median, goal in report["renders"]]
    export = report["export"]
    lines.append(
        f"| CSV export, {export['rows']:,} calls | {export['seconds']:.2f} s, {export['rate']:,.0f} rows/s, "
        f"peak RSS growth {export['rss_growth_kb'] / 1024:.1f} MB for {export['bytes'] / 1e6:.0f} MB streamed "
        "| >= 20,000 rows/s, constant memory |"
    )
    if verify is not None:
        lines += [
            f"| verify_audit, {verify['workers']} processes ({verify['parallel'][1]}) | {verify['parallel'][0]:.1f} s "
            f"(peak RSS {verify['parallel'][2] / 1024:.0f} MB) | <= 15 s |",
            f"| baseline: the previous verify (same run, same events) | {verify['legacy'][0]:.1f} s "
            f"(peak RSS {verify['legacy'][2] / 1024:.0f} MB) | - |",
            f"| ratio: previous / parallel | {verify['legacy'][0] / verify['parallel'][0]:.2f}x | - |",
        ]
    else:
        lines.append("| verify_audit | not measured in this run (--skip-verify) | <= 15 s |")
    lines.append("")
    path.write_text("\n".join(lines))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--verify-events", type=int, default=1_000_000)
    parser.add_argument("--database", default="toolhub_console_bench")
    parser.add_argument("--export-rows", type=int, default=100_000)
    parser.add_argument("--skip-verify", action="store_true", help="Leave verify_audit out (pages and export only).")
    parser.add_argument("--legacy-verify", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.legacy_verify:
        legacy_verify()
        return
    load_start = _load()
    _ensure_database(options.database)
    calls = _fill(options.database, options.calls)
    print("verify_audit:", flush=True)
    verify = None if options.skip_verify else _verify(f"{options.database}_verify", options.verify_events)
    _setup_django(options.database)
    from toolhub.models import AuditChainHead

    pending = _approval_requests()
    auditor, operator = _users()
    events = sum(AuditChainHead.objects.values_list("seq", flat=True))
    print("renders:", flush=True)
    renders = _renders(auditor, operator)
    export = _export(auditor, options.export_rows)
    report = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_start": load_start,
        "load_end": _load(),
        "calls": calls,
        "events": events,
        "pending": pending,
        "renders": renders,
        "export": export,
        "verify": verify,
    }
    print(f"wrote {_write(report)}")


if __name__ == "__main__":
    main()
