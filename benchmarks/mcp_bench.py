"""The latency an MCP ``tools/call`` adds over the same governed call made in process.

``python -m benchmarks.mcp_bench [--rounds N]``: on a database of its own (``benchmarks.harness``), one
low-risk call (``record_effect``) timed both ways in turn, round after round:

- direct: ``tool_call_request`` in this process, executed eagerly (the embedded mode), as the agent
  loop's calls are;
- MCP: the official ``mcp`` SDK client (one connection kept open) in this process calling the same
  tool over streamable HTTP on toolhub's ASGI app under uvicorn (a process of its own, executing
  eagerly too): token authentication, the governed call, the result back as JSON-RPC over SSE.

On a shared 2-core machine the MCP figure includes the client's own work and the two processes'
competition for the cores.
Writes benchmarks/results/mcp.md with the date and the load average, and prints the figures as JSON.
"""

import argparse
import datetime as dt
import json
import os
import socket
import subprocess
import sys
import time
from typing import Any

from benchmarks.harness import RESULTS, ROOT, configure, free_port, interleaved, load_average, median, percentile


def measure(rounds: int) -> dict[str, Any]:
    import anyio.from_thread
    from celery import current_app
    from django.contrib.auth.models import User
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from toolhub.api.keys import api_key_issue
    from toolhub.direct import caller_principal
    from toolhub.models import Tenant, TenantMembership
    from toolhub.pipeline import CallRequest, tool_call_request
    from toolhub.tools.context import ToolContext

    current_app.conf.task_always_eager = True
    tenant, _ = Tenant.objects.get_or_create(slug="acme", defaults={"name": "ACME"})
    user = User.objects.create_user("mcp-bench")
    TenantMembership.objects.create(user=user, tenant=tenant)
    key = api_key_issue(user)
    principal = caller_principal(user)
    context = ToolContext(tenant="acme", user=user.username, user_id=user.pk)

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "toolhub.asgi:application", "--port", str(port), "--log-level", "warning"],
        cwd=ROOT,
        env={**os.environ, "CELERY_TASK_ALWAYS_EAGER": "1"},
    )
    _wait_until_listening(port, server)

    def direct() -> None:
        call = tool_call_request(
            request=CallRequest(
                tool_name="record_effect", arguments={"note": "benchmark"}, principal=principal, context=context
            )
        )
        assert call.status == "succeeded", call.status

    try:
        with anyio.from_thread.start_blocking_portal() as portal:
            http = portal.wrap_async_context_manager(create_mcp_http_client(headers={"Authorization": f"Bearer {key}"}))
            with http as http_client:
                transport = streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http_client)
                with portal.wrap_async_context_manager(Client(transport)) as client:

                    def over_mcp() -> None:
                        result = portal.call(client.call_tool, "record_effect", {"note": "benchmark"})
                        assert not result.is_error, result

                    for _ in range(20):  # warm connections, caches, schema builds
                        direct()
                        over_mcp()
                    direct_times, mcp_times = interleaved(direct, over_mcp, rounds=rounds)
    finally:
        server.terminate()
        server.wait(10)
        current_app.conf.task_always_eager = False
    added = [m - d for m, d in zip(sorted(mcp_times), sorted(direct_times), strict=True)]
    return {
        "rounds": rounds,
        "direct_ms_p50": median(direct_times) * 1000,
        "direct_ms_p99": percentile(direct_times, 0.99) * 1000,
        "mcp_ms_p50": median(mcp_times) * 1000,
        "mcp_ms_p99": percentile(mcp_times, 0.99) * 1000,
        "added_ms_p50": (median(mcp_times) - median(direct_times)) * 1000,
        "added_ms_p99": (percentile(mcp_times, 0.99) - percentile(direct_times, 0.99)) * 1000,
        "ratio_p50": median(mcp_times) / median(direct_times),
        "added_ms_min": min(added) * 1000,
    }


def _wait_until_listening(port: int, server: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"uvicorn exited with {server.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("uvicorn did not start listening")


def write(figures: dict[str, Any]) -> None:
    lines = [
        "# MCP `tools/call` over the direct in-process call",
        "",
        f"Measured {figures['date']} with `python -m benchmarks.mcp_bench --rounds {figures['rounds']}`; "
        f"load average {figures['load_before']} before, {figures['load_after']} after (1, 5, 15 min).",
        "",
        "One low-risk call (`record_effect`, eager execution), interleaved round by round. MCP: the official",
        "SDK client (this process) over streamable HTTP to toolhub's ASGI app under uvicorn (another process).",
        "",
        "| | p50 ms | p99 ms |",
        "| --- | ---: | ---: |",
        f"| direct (`tool_call_request`) | {figures['direct_ms_p50']:.2f} | {figures['direct_ms_p99']:.2f} |",
        f"| MCP `tools/call` | {figures['mcp_ms_p50']:.2f} | {figures['mcp_ms_p99']:.2f} |",
        f"| added by MCP | {figures['added_ms_p50']:.2f} | {figures['added_ms_p99']:.2f} |",
        "",
        f"MCP / direct at p50: {figures['ratio_p50']:.2f}x.",
        "",
    ]
    (RESULTS / "mcp.md").write_text("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    services = configure(prefix="toolhub_bench_mcp", broker_db=13)
    load_before = load_average()
    try:
        figures = measure(args.rounds)
    finally:
        from django.db import connections

        connections.close_all()
        services.close()
    figures.update(
        date=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"), load_before=load_before, load_after=load_average()
    )
    write(figures)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
