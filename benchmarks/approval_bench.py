"""Only the ``approve -> executed -> run completed`` figure of ``make bench``, on services of its own.

``python -m benchmarks.approval_bench [--samples N]``: the same measurement as ``benchmarks.run``'s
``approval_latency`` (2 workers of one process each), on a database and a broker this run creates and
drops (``benchmarks.harness.configure``), so it can run beside another benchmark. Prints JSON with the
load averages at the start and the end.
"""

import argparse
import json

from benchmarks.harness import configure, load_average

PREFIX = "toolhub_bench_approval"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=100)
    args = parser.parse_args()
    load_at_start = load_average()
    services = configure(prefix=PREFIX)
    from django.db import connection

    from benchmarks.run import approval_latency
    from tests.integration.workers import Worker, purge_queue

    try:
        purge_queue()
        workers = [Worker(f"approvalbench{index}", concurrency=1).start() for index in range(2)]
        try:
            result = approval_latency(samples=args.samples)
        finally:
            for worker in workers:
                worker.stop()
            connection.close()
    finally:
        services.close()
    result["load_average_at_start"] = load_at_start
    result["load_average_at_end"] = load_average()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
