"""How many uploads may stream at once: per user and in all.

An upload streams for as long as its client takes; a few clients trickling bytes must not take
every worker thread, connection or disk slot from everyone else. So an upload takes a slot before
its first byte is read and gives it back when its body is in (or it failed): beyond
`per_user` slots for one user it is answered 429 `upload.too_many`, beyond `total` 503
`upload.busy`, both with Retry-After. Nothing is read or stored for a refused upload.

The gate lives in one server process (the event loop's thread: no lock needed); with several
server processes each has its own, so the bound is per process.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from server.core.errors import ServerBusyError, TooManyUploadsError


@dataclass
class UploadGate:
    total: int
    per_user: int
    retry_after_s: int = 30
    active: Counter[int | None] = field(default_factory=Counter)

    @property
    def in_flight(self) -> int:
        return sum(self.active.values())

    @asynccontextmanager
    async def slot(self, owner: int | None) -> AsyncIterator[None]:
        """Hold one upload slot for `owner` (None: count only towards the total)."""
        if owner is not None and self.active[owner] >= self.per_user:
            raise TooManyUploadsError(
                f"you have {self.active[owner]} uploads in progress, the most one account may "
                f"have at once is {self.per_user}; wait for one to finish, then send again",
                retry_after_s=self.retry_after_s)
        if self.in_flight >= self.total:
            raise ServerBusyError(
                f"the server is receiving {self.in_flight} uploads, its limit; send again in "
                f"{self.retry_after_s} s", retry_after_s=self.retry_after_s)
        self.active[owner] += 1
        try:
            yield
        finally:
            self.active[owner] -= 1
            if self.active[owner] <= 0:
                del self.active[owner]
