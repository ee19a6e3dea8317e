"""The benchmarks still run: each section, at its smallest, prints its table with no errors.

`make bench` takes minutes and is not part of the suite; these runs take seconds and catch a
benchmark that a change broke (a server that no longer starts, a policy that now refuses the
load, a request shape that is now an error). They assert nothing about speed.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.bench_smoke  # `make bench-smoke`, after the suite in `make test`
ROOT = Path(__file__).resolve().parent.parent


def run_bench(*args: str, timeout: float = 180) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")])}
    result = subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return result.stdout


def rows(output: str, title: str) -> list[dict[str, str]]:
    """The rows of the markdown table under `### title`, as dicts keyed by the header."""
    table: list[str] = []
    for line in output.split(f"### {title}", 1)[1].splitlines():
        if line.startswith("|"):
            table.append(line)
        elif table:
            break  # the first table under the title has ended
    header = [cell.strip() for cell in table[0].strip("|").split("|")]
    return [
        dict(zip(header, (cell.strip() for cell in line.strip("|").split("|")), strict=True))
        for line in table[2:]
    ]


def test_wire_serves_every_operation_on_every_server() -> None:
    output = run_bench("bench.wire", "0.3", "1")
    table = rows(output, "Wire")
    assert len(table) == 34  # 3 operations x 2 concurrencies x 6 servers, less GetTask on @a2a-js/sdk
    assert all(
        row["errors"] == "0" and float(row["req/s (events/s for streams)"].replace(",", "")) > 0
        for row in table
    ), table
    targets = rows(output, "Wire targets")
    assert len(targets) == 4 and all(row["met"] in ("met", "not met") for row in targets)


def test_router_turns_complete_in_process_and_over_http() -> None:
    output = run_bench(
        "bench.router", "--turns", "5", "--seconds", "3", "--http-turns", "3", "--http-seconds", "5"
    )
    assert len(rows(output, "Router, 10-hop turn in process")) == 2
    assert len(rows(output, "Router, 10 remote members over HTTP vs direct calls")) == 4


def test_scale_answers_and_stores_every_turn() -> None:
    table = rows(run_bench("bench.scale", "--sizes", "4"), "Concurrent team conversations (3 hops per turn)")
    assert [(row["errors"], row["not stored"]) for row in table] == [("0", "0")]


@pytest.mark.parametrize("subscribers", [3])
def test_fanout_reaches_every_subscriber(subscribers: int) -> None:
    table = rows(
        run_bench("bench.fanout", "--sizes", str(subscribers)),
        "One event fanned out to S subscribers of one task",
    )
    assert [row["got reply"] for row in table] == [f"{subscribers}/{subscribers}"]


def test_scrub_times_every_adversarial_input() -> None:
    table = rows(run_bench("bench.scrub", "--repeat", "1"), "Log scrubbing, adversarial inputs")
    assert len(table) == 9 and table[0]["input"] == "plain text"


def test_cluster_measures_events_failover_and_workers() -> None:
    output = run_bench(
        "bench.cluster", "--events", "5", "--seconds", "0.5", "--rounds", "1", "--failovers", "1"
    )
    events = rows(output, "Room events across replicas")
    assert [row["events"] for row in events] == ["5", "5", "5"]
    (failover,) = rows(output, "Failover")
    assert failover["samples"] == "1" and float(failover["median s"]) > 0
    assert len(rows(output, "SendMessage with `--workers`")) == 2


def listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def needs_postgres_and_redis() -> None:
    """Like every test that needs them (tests/conftest.py): fail, naming what is missing."""
    for name, port in (("PostgreSQL", 5432), ("Redis", 6379)):
        if not listening(port):
            pytest.fail(f"this benchmark needs {name} on 127.0.0.1:{port}, which is not listening")


ROOM_OPERATIONS = [
    "SendMessage to echo",
    "post, 1 room, 1 writer",
    "post, 16 rooms, 1 writer each",
    "post, 1 room, 32 writers",
    "post, 16 rooms, 32 writers",
    "post, 16 rooms, 32 people",
]


def posts_answered(table: list[dict[str, str]], rate: str) -> bool:
    return all(row["errors"] == "0" and float(row[rate].replace(",", "")) > 0 for row in table)


def test_rooms_posts_on_sqlite_with_the_cpu_and_room_ratios() -> None:
    output = run_bench("bench.rooms", "--quick", "--databases", "sqlite", "--no-replicas")
    assert "an event-loop wake after 1 ms idle costs" in output  # what waiting costs on this host
    table = rows(output, "Room posts, one process")
    assert [row["operation"] for row in table] == ROOM_OPERATIONS
    assert posts_answered(table, "req/s"), table
    spread = table[2]  # 16 rooms, 1 writer each: the ratios beside its rate
    assert spread["CPU vs SendMessage"].endswith("x") and spread["req/s vs 1 room, 1 writer"].endswith("x")
    targets = rows(output, "Room targets")
    assert len(targets) == 2 and all(row["met"] in ("met", "not met") for row in targets)


def test_rooms_posts_with_postgres_1ms_away_on_one_and_two_replicas() -> None:
    needs_postgres_and_redis()
    output = run_bench("bench.rooms", "--quick", "--databases", "postgres-1ms")
    assert "through the proxy" in output  # the proxy's round trip, measured
    table = rows(output, "Room posts, one process")
    assert [(row["database"], row["operation"]) for row in table] == [
        ("PostgreSQL 1 ms away", operation) for operation in ROOM_OPERATIONS
    ]
    assert posts_answered(table, "req/s"), table
    pair = rows(output, "Room posts, replicas")
    assert [row["replicas"][:2] for row in pair] == ["1:", "2:", "2:"] and posts_answered(pair, "posts/s")
    # each replica's CPU budget, as applied (a cgroup's quota as root; said when none could be set)
    assert "CPU: 0.25 core each (a CFS quota)" in output or "CPU: not limited (no writable cgroup)" in output
    targets = [row["target"] for row in rows(output, "Room targets")]
    assert [target.split(",")[0] for target in targets] == [
        "plain post's server CPU (16 rooms",
        "posts/s",
        "posts/s",
        "posts/s",
    ]
    assert "16 rooms vs 1" in targets[1]
    assert (
        "2 replicas vs 1 (each room on one" in targets[2]
        and "2 replicas vs 1 (each room on both" in targets[3]
    )


def test_watchers_of_a_room_each_get_every_post() -> None:
    output = run_bench("bench.watchers", "--quick")  # 3, then 10 watchers; 2 posts each
    table = rows(output, "WebSocket watchers of one room")
    assert [(row["subscribed"], row["got"]) for row in table] == [("3/3", "6/6"), ("10/10", "20/20")]
    assert "Errors" not in output


def test_tracing_compares_off_and_on_with_no_errors() -> None:
    output = run_bench("bench.tracing", "0.5", "1")
    table = rows(output, "Tracing, off and on")
    samplers = ["tracing off", "always_on", "parentbased_traceidratio 0.1"]
    assert [row["server"] for row in table] == samplers * 2
    assert all(row["errors"] == "0" and float(row["req/s"].replace(",", "")) > 0 for row in table), table
    paired = rows(output, "Tracing, side by side")  # a traced server and the off one on one core at once
    operations = ["SendMessage to echo", "team turn, 3 hops of 1 ms"]
    assert [(row["operation"], row["sampler"]) for row in paired] == [
        (operation, sampler) for operation in operations for sampler in samplers[1:]
    ]
    ratios = [float(row["traced/off req/s, median"].rstrip("x")) for row in paired]
    assert all(row["errors"] == "0" for row in paired) and all(ratio > 0 for ratio in ratios), paired


def test_growth_measures_each_step_and_the_write_cost_through_python_m_bench() -> None:
    output = run_bench(
        "bench", "growth", "--turns", "40", "--rows", "500", "--db", "sqlite", "--window", "10",
        "--reads", "3", "--steps", "1", "--index-rows", "200", "--index-rounds", "1",
    )  # fmt: skip
    steps = rows(output, "Growth, SQLite")
    assert [row["conversations"] for row in steps][1] == "40", steps
    assert len(steps) == 4 and all(row["errors"] == "0" for row in steps), steps
    assert steps[2]["step"] == "server restarted" and steps[3]["step"].startswith("+ 500 tasks")
    targets = rows(output, "Growth targets")
    assert len(targets) == 7 and all(row["met"] in ("met", "not met") for row in targets)
    costs = rows(output, "Write cost of the retention indexes and the count triggers")
    assert [row["schema"] for row in costs] == [
        "head",
        "without 0015's retention indexes",
        "without 0016's count triggers",
    ]


def test_durable_compares_two_trees_and_a_killed_replicas_turn_completes_elsewhere() -> None:
    output = run_bench("bench.durable", "--rounds", "1", "--conversations", "2", "--before", "HEAD")
    assert [
        row["team"] for row in rows(output, "Durable turns: server CPU per 3-hop turn, side by side")
    ] == [
        "quick",
        "remote",
    ]
    (taken,) = rows(output, "Durable turns: a killed replica's turn completed by another")
    assert (taken["state"], taken["trail"]) == ("completed", "m0 -> m1 -> m2"), taken
