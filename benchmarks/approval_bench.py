"""Only the ``approve -> executed -> run completed`` figure of ``make bench``, on a database of its own.

``python -m benchmarks.approval_bench [--samples N]``: the same measurement as ``benchmarks.run``'s
``approval_latency`` (2 workers of one process each), with a database, broker DB and queue named after
this process, so it can run beside another benchmark. Prints JSON with the 1-minute load average.
"""

import argparse
import json
import os

from benchmarks.harness import configure


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=100)
    args = parser.parse_args()
    suffix = f"{os.getpid()}"
    database = f"toolhub_bench_approval_{suffix}"
    configure(database=database, broker_db=14, queue=f"toolhub-bench-approval-{suffix}")
    from django.db import connection

    from benchmarks.run import approval_latency
    from tests.integration.workers import Worker, purge_queue

    purge_queue()
    load_before = os.getloadavg()
    workers = [Worker(f"approvalbench{index}", concurrency=1).start() for index in range(2)]
    try:
        result = approval_latency(samples=args.samples)
    finally:
        for worker in workers:
            worker.stop()
        connection.close()
        _drop(database)
    result["load_average_before"] = load_before
    result["load_average_after"] = os.getloadavg()
    print(json.dumps(result, indent=2))


def _drop(database: str) -> None:
    import psycopg

    server = os.environ.get("BENCH_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432")
    with psycopg.connect(f"{server}/postgres", autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


if __name__ == "__main__":
    main()
