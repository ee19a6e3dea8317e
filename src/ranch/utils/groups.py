"""Task groups for work that lives as long as an object is open, written once as context managers.

`background()` runs tasks for the length of a block and cancels them when it ends (however it
ends; what the block raises goes on as it is, never into the group). `Lifespan` makes an object its
own async context manager from one `@asynccontextmanager` method, so opening and closing read top
to bottom in one place instead of a task group entered by hand in `__aenter__` and left in
`__aexit__`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Self

import anyio
from anyio.abc import TaskGroup


@asynccontextmanager
async def background() -> AsyncIterator[TaskGroup]:
    """A task group whose tasks are cancelled, not waited for, when the block ends."""
    group = anyio.create_task_group()
    await group.__aenter__()
    try:
        yield group
    finally:
        group.cancel_scope.cancel()
        await group.__aexit__(None, None, None)


class Lifespan:
    """An object that is opened and closed by its `lifespan()` (an `@asynccontextmanager`)."""

    _open: AbstractAsyncContextManager[Any] | None = None

    def lifespan(self) -> AbstractAsyncContextManager[Any]:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        opening = self.lifespan()
        await opening.__aenter__()
        self._open = opening
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        opened, self._open = self._open, None
        if opened is not None:
            await opened.__aexit__(*exc_info)
