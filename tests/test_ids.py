"""ranch's ids are well-formed, distinct UUID4s, also across a fork."""

from __future__ import annotations

import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor

from ranch.ids import new_id, random_hex


def test_ids_are_distinct_version_4_uuids() -> None:
    ids = [new_id() for _ in range(2000)]  # crosses several random blocks
    assert len(set(ids)) == len(ids)
    for value in ids[:300]:
        parsed = uuid.UUID(value)
        assert (parsed.version, parsed.variant, str(parsed)) == (4, uuid.RFC_4122, value)


FORK_CHECK = """
import os
from ranch.ids import new_id
new_id()  # the parent now holds a block with ids still unused
read, write = os.pipe()
child = os.fork()
if child == 0:
    os.write(write, new_id().encode())
    os._exit(0)
os.waitpid(child, 0)
print(os.read(read, 64).decode(), new_id())
"""


def test_a_forked_child_does_not_repeat_its_parents_ids() -> None:
    # in a fresh interpreter: forking the threaded test process itself would be unsafe
    result = subprocess.run([sys.executable, "-c", FORK_CHECK], capture_output=True, text=True, check=True)
    child, parent = result.stdout.split()
    assert child != parent
    assert uuid.UUID(child).version == 4


def test_random_hex_is_lowercase_hex_and_does_not_repeat() -> None:
    values = [random_hex() for _ in range(600)]  # crosses blocks of the pool
    assert len(set(values)) == len(values)
    assert all(len(value) == 32 and int(value, 16) >= 0 and value == value.lower() for value in values)


def test_threads_never_share_an_id() -> None:
    with ThreadPoolExecutor(4) as pool:
        batches = list(pool.map(lambda _: [new_id() for _ in range(500)], range(8)))
    ids = [value for batch in batches for value in batch]
    assert len(set(ids)) == len(ids) == 4000
