"""The benchmark and chaos harness: every run names its own database and owns a broker it may kill."""

import redis

from benchmarks.harness import PrivateRedis, interleaved, unique_name


def test_every_run_gets_a_database_name_of_its_own() -> None:
    names = {unique_name("toolhub_bench") for _ in range(50)}
    assert len(names) == 50
    assert all(name.startswith("toolhub_bench_") and len(name) < 63 for name in names)


def test_a_private_redis_is_killed_and_started_again_on_its_port_and_two_never_share_one() -> None:
    first, second = PrivateRedis().start(), PrivateRedis().start()
    try:
        assert first.port != second.port
        client = redis.Redis.from_url(f"{first.url}/0")
        client.set("message", "queued")
        assert redis.Redis.from_url(f"{second.url}/0").get("message") is None

        first.kill()
        first.start()

        assert client.get("message") is None  # reconnected; the killed server kept nothing
        assert client.ping()
    finally:
        first.stop()
        second.stop()
    assert first.process.poll() is not None and second.process.poll() is not None


def test_interleaved_times_every_operation_in_every_round() -> None:
    order: list[str] = []
    times = interleaved(lambda: order.append("a"), lambda: order.append("b"), lambda: order.append("c"), rounds=3)
    assert order == ["a", "b", "c"] * 3
    assert [len(samples) for samples in times] == [3, 3, 3]
