"""What a replica says on the `rooms.events` topic, and what it hears (rooms/relay.py).

One commit is one message naming every room it wrote with that room's newest cursor, however many
rooms a batch of posts took; messages of a replica of an earlier release (one room each, or none
named: every room) are still heard, and a replica's own messages are not.
"""

from __future__ import annotations

import anyio
import orjson
import pytest

from ranch.fanout.memory import MemoryFanout
from ranch.rooms.relay import TOPIC, Relay

pytestmark = pytest.mark.anyio


class Shared(MemoryFanout):
    """One process's topics, heard by every relay in it as replicas hear Redis's."""

    shared = True


class Heard:
    """A replica's end of the topic, with what it was told."""

    def __init__(self, fanout: MemoryFanout, origin: str) -> None:
        self.events: list[tuple[str | None, int]] = []
        self.wanted, self.enough = 0, anyio.Event()
        self.relay = Relay(
            fanout,
            origin,
            events=self._told,
            deliver=lambda frame: None,
            to_agent=lambda agent, frame: 0,
        )

    def _told(self, room: str | None, cursor: int) -> None:
        self.events.append((room, cursor))
        if len(self.events) >= self.wanted:
            self.enough.set()

    async def until(self, count: int) -> None:
        self.wanted = count
        if len(self.events) < count:
            await self.enough.wait()


async def test_one_commit_is_one_message_naming_each_room_it_wrote() -> None:
    fanout = Shared()
    sent: list[bytes] = []
    async with fanout, anyio.create_task_group() as group:
        listening = fanout.listen(TOPIC)
        async with listening as messages:
            here, there = Heard(fanout, "here"), Heard(fanout, "there")
            await group.start(here.relay.run)
            await group.start(there.relay.run)
            here.relay.committed({"r1": 4, "r2": 9, "r3": 1})
            with anyio.fail_after(5):
                async for data in messages:
                    sent.append(data)
                    break
                await there.until(3)
            group.cancel_scope.cancel()
    assert len(sent) == 1 and orjson.loads(sent[0])["rooms"] == {"r1": 4, "r2": 9, "r3": 1}
    assert there.events == [("r1", 4), ("r2", 9), ("r3", 1)]
    assert here.events == []  # its own: handed out here already


async def test_messages_of_an_earlier_release_are_still_heard() -> None:
    fanout = Shared()
    async with fanout, anyio.create_task_group() as group:
        here = Heard(fanout, "here")
        await group.start(here.relay.run)
        for message in (
            {"kind": "events", "room": "r1", "cursor": 7, "origin": "old"},  # one room a message
            {"kind": "events", "origin": "old"},  # none named: every room
        ):
            await fanout.publish(TOPIC, orjson.dumps(message))
        with anyio.fail_after(5):
            await here.until(2)
        group.cancel_scope.cancel()
    assert here.events == [("r1", 7), (None, 0)]
