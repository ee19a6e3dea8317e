"""`ranch rooms`, `ranch post`, `ranch watch`, `ranch agents`: the hub from a terminal, as a user
runs them against `ranch serve`'s demo (key rk_demo) on SQLite and PostgreSQL, readable or `--json`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from _support.hubkit import wait_until
from _support.servers import Run, ServerProcess, free_port

DEMO_KEY = "rk_demo"


def test_rooms_agents_and_post_with_a_file(
    demo_on_each_database: ServerProcess, ranch: Run, tmp_path: Path
) -> None:
    demo = demo_on_each_database
    listed = ranch("rooms", "--url", demo.url, "--key", DEMO_KEY)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split()[:3] == ["demo", "Helpdesk", "demo"] and "answers: @helpdesk" in listed.stdout
    as_json = json.loads(ranch("rooms", "--url", demo.url, "--key", DEMO_KEY, "--json").stdout)
    assert [room["id"] for room in as_json] == ["demo"]

    agents = json.loads(ranch("agents", "--url", demo.url, "--key", DEMO_KEY, "--json").stdout)
    assert {"helpdesk", "echo"} <= {agent["id"] for agent in agents}
    echoes = ranch("agents", "--url", demo.url, "--key", DEMO_KEY, "--mode", "image/png")
    assert [line.split()[0] for line in echoes.stdout.splitlines()] == ["echo"]  # echo takes */*
    assert (
        "no agent matches" in ranch("agents", "--url", demo.url, "--key", DEMO_KEY, "--skill", "zzz").stdout
    )

    note = tmp_path / "note.txt"
    note.write_text("the plan")
    env_key = {**os.environ, "RANCH_API_KEY": DEMO_KEY, "RANCH_URL": demo.url}
    command = [sys.executable, "-m", "ranch", "post", "demo", "@helpdesk find papers on moss"]
    posted = subprocess.run(
        [*command, "--file", str(note), "--json"], capture_output=True, text=True, env=env_key, timeout=60
    )
    assert posted.returncode == 0, posted.stderr
    message = json.loads(posted.stdout)
    assert message["mentions"] == ["helpdesk"]
    assert message["parts"][0] == {  # the file's bytes are a link to them on the hub (part 0: the text)
        "url": f"/api/v1/rooms/demo/messages/{message['id']}/parts/1",
        "filename": "note.txt",
        "mediaType": "text/plain",
        "size": 8,
    }


def test_watch_draws_each_hop_and_the_route_as_they_happen(
    demo_on_each_database: ServerProcess, tmp_path: Path
) -> None:
    demo = demo_on_each_database
    env = {**os.environ, "RANCH_API_KEY": DEMO_KEY, "RANCH_URL": demo.url, "PYTHONUNBUFFERED": "1"}
    # a room of its own: a turn another test started in `demo` may still be drawing its hops there
    room = f"watched-{time.monotonic_ns()}"
    made = httpx.post(
        f"{demo.url}/api/v1/rooms",
        json={"id": room, "participants": [{"kind": "team", "id": "helpdesk"}]},
        headers={"X-API-Key": DEMO_KEY},
        timeout=10,
    )
    assert made.status_code == 201, made.text
    out = tmp_path / "watch.out"
    with out.open("wb") as sink:
        watch = subprocess.Popen(
            [sys.executable, "-m", "ranch", "watch", room, "--last", "0"],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(lambda: f"-- watching {room}" in out.read_text(), timeout=30, what="watch to start")
        subject = f"lichen{time.monotonic_ns()}"
        answer = httpx.post(
            f"{demo.url}/api/v1/rooms/{room}/messages",
            json={"text": f"@helpdesk find papers on {subject}"},
            headers={"X-API-Key": DEMO_KEY},
            timeout=10,
        )
        assert answer.status_code == 201
        wait_until(lambda: "route: user -> triage" in out.read_text(), timeout=30, what="the route")
    finally:
        watch.terminate()
        watch.wait(timeout=10)
    lines = out.read_text().splitlines()
    said = next(i for i, line in enumerate(lines) if f"demo: @helpdesk find papers on {subject}" in line)
    hops = [line.strip() for line in lines[said:] if line.strip().startswith("-> ")]
    assert [hop.split(" (")[0] for hop in hops] == [
        "-> triage -> researcher",
        "-> researcher -> triage",
        "-> triage -> user",
    ]
    route = next(line for line in lines if "route:" in line)
    assert "route: user -> triage -> researcher -> triage -> user" in route and "trace " in route
    assert any("· triage working" in line for line in lines)


def test_a_refused_key_and_a_missing_server_are_one_clear_line(demo: ServerProcess, ranch: Run) -> None:
    refused = ranch("rooms", "--url", demo.url, "--key", "rk_wrong")
    assert refused.returncode == 2 and refused.stderr.startswith("error: ") and refused.stdout == ""
    assert len(refused.stderr.strip().splitlines()) == 1
    away = ranch("rooms", "--url", f"http://127.0.0.1:{free_port()}", "--key", DEMO_KEY)
    assert away.returncode == 2 and "is `ranch serve` running?" in away.stderr
    unknown = ranch("post", "nowhere", "hi", "--url", demo.url, "--key", DEMO_KEY)
    assert unknown.returncode == 2 and "nowhere" in unknown.stderr
    empty = ranch("post", "demo", "--url", demo.url, "--key", DEMO_KEY)
    assert empty.returncode == 2 and "--file" in empty.stderr
