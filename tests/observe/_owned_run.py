"""A hub's life in one event loop, closed the way a careless server closes it: the loop is shut with
no task cancelled for it, then collected. A task some part of ranch started and did not own (a bare
`create_task`, `ensure_future`) is then still pending, and asyncio says "Task was destroyed but it
is pending". Run by tests/observe/test_owned_tasks.py as `python _owned_run.py DB`, tracing
configured by its environment (OTLP/HTTP to the test's receiver), the access log on stderr.

What it exercises: the lifespan (CommitGroup, the span export, the access log), team turns whose
member is a team (`MemberCall`), SendMessage and a streamed turn.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import uuid

import httpx

from ranch.config import parse_config
from ranch.hub.app import Settings, create_app
from ranch.policy.logs import AccessLog

CONFIG = """
agents:
  - id: desk
    kind: rules
    rules: [{reply: "answered: {text}", route: user, reason: the desk answers}]
teams:
  - {id: inner, members: [desk], default_agent: desk}
  - {id: outer, members: [inner], default_agent: inner}
"""


def body(text: str, method: str = "SendMessage") -> dict[str, object]:
    message = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": text}]}
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message}}


async def life(database: str) -> None:
    settings = Settings(
        database_url=f"sqlite+aiosqlite:///{database}",
        admin_key="rk_" + "o" * 40,
        announce=lambda _line: None,
        access_log=AccessLog(sys.stderr),
    )
    app = create_app(parse_config(CONFIG), settings)
    headers = {"A2A-Version": "1.0"}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://hub", headers=headers) as http:
            url = "/a2a/agents/outer"
            answers = await asyncio.gather(*(http.post(url, json=body(f"n{n}")) for n in range(8)))
            assert all(answer.status_code == 200 for answer in answers), [a.text for a in answers]
            streamed = await http.post(url, json=body("streamed", "SendStreamingMessage"))
            assert streamed.status_code == 200, streamed.text


def main() -> None:
    loop = asyncio.new_event_loop()
    loop.run_until_complete(life(sys.argv[1]))
    loop.close()  # no task cancelled for it: what is still pending was nobody's
    del loop
    gc.collect()
    print("lived", file=sys.stderr)


if __name__ == "__main__":
    main()
