"""How many requests the app works on at once, how many may wait, and who is shed.

A request takes a pooled connection in its first dependency and keeps it until it ends, while
it waits (between dependencies and the handler) for a worker thread. With more requests in
flight than connections, requests holding connections wait for threads held by requests
waiting for connections: at 80 concurrent readers the 30-connection pool timed out into
71 x 500 (issue 21). `AdmissionMiddleware` lets at most `limit` requests into the app at once;
the others wait their turn in its queue (a coroutine each, no connection, no thread), so the
pool (`Settings.db_pool`: two connections per admitted request, a read and a write session,
plus headroom) can never run dry.

Waiting is bounded, and judged on arrival (issue 38.5). An unbounded queue turned 1,000 readers
into 60 s client time-outs for everyone; a bounded one that only timed waiters out still
answered its 503s after the whole wait. A newcomer that finds its lane full is told its
expected wait, its position in the queue times the lane's measured pace: the time from the
queue's forming to now over the grants since (the last PACE_ROUNDS rounds of them;
`Lane.pace_s`: bursts and gaps averaged, a stalled queue slower). It queues only if that wait,
times WAIT_MARGIN (2), is within `max_wait_s`, and while fewer than `max_waiting` wait; else it
is answered 503 `server.busy` with Retry-After (the expected wait) at once, before any session
or thread is spent on it. `max_wait_s` bounds the actual wait of the ones that queue (one bound
for a whole-board read's two lanes, judged once on arrival): one refused after it is one the
estimate got wrong, counted in `late`. Until a lane has measured its pace it falls back on its
hold time and lets at most UNMEASURED_ROUNDS rounds (four requests per slot) wait: the first
wave of 1,000 readers found nothing measured and 256 queued, served ~15 a second, and the later
ones were answered after the whole 20 s.

A waiter stays judged while it waits (`_rejudge`, every REJUDGE_S): one whose expected wait
at its place in the queue passes the time its bound has left is answered 503 then, with
Retry-After, not at the bound (counted in `withdrawn`). Before a lane has measured a release
its hold time is unknown, and the first wave's waiters were admitted on an expected wait of
0: whole-board reads that held a slot ~5 s left 15 of a 1,000-reader wave waiting the whole
20 s (docs/performance.md). So the hold time a lane reckons with is at least the time its
current holders have held their slots already (the lower median of them, `Lane.hold_at`), and
the hold times measured before are kept after the queue empties. The slots then free at their
holders' remaining time, then a hold later each (`Lane.waits`): 30 readers at once on 8 slots
(tests/load/test_upload_pressure.py) wait a few rounds of short holds and are all served.

The hold time alone missed what a starved event loop adds (a waiter wakes when the loop gets to
it): at 1,000 readers on 2 loaded cores 10-17% of the 503s were waiters that timed out. Each
lane also keeps the average time its requests actually waited (`wait_s`), and a newcomer that
finds the lane full and a round of requests (one per slot) already waiting is refused at once
while that measured wait passes `target_wait_s` (default a quarter of `max_wait_s`). A round is
kept: refusing on the measured wait alone emptied the queue, and slots then idled while the
next request crawled through the starved loop to them (1.7-5x fewer reads served per second).

A connection refused with 503 that asks again before its Retry-After is held until that is due
(at most REPEAT_DELAY_MAX_S), then judged again (`_hold`): readers that ignore Retry-After had
the one event loop refuse 520-980 requests a second, and the workers' API and the uploads waited
a turn of it at every step (3.6-8.2x and 2.6-5.6x their latency beside uploads alone; held,
1.1-1.9x and 1.1-1.7x, docs/performance.md). A whole-board read is judged by the general lane
on arrival too, not only after its wait for a heavy slot.

Lanes, so that a crowd of one kind cannot starve the others of threads, the GIL and the CPU:
- `heavy`: whole-board reads (the leaderboard API without a small `limit`, its CSV), each ~1 s
  of CPU at 10,000 entries when not kept; at most `heavy_limit` (default: 2, or limit / 16) at
  once, inside the general lane. On a 2-core host, 32 of them at once left the event loop and
  the workers' calls a thirtieth of the GIL each, and served no reader sooner.
- `internal`: the workers' API (`internal_limit` slots, never shed): a run's claim, heartbeat
  and finish must not queue behind readers.
- multipart uploads are not counted: they hold no session while they stream
  (core/multipart.py) and have their own gate (services/upload_gate.py).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from collections import deque
from dataclasses import dataclass, field
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Receive, Scope, Send

INTERNAL_PREFIX = "/internal/"
"""The workers' API (server/api/internal.py): its own lane, never shed."""
BOARD_API = re.compile(r"^/api/v1/phases/\d+/leaderboard/?$")
HEAVY_ROWS = 1_000
"""A board read asking for more entries than this (or for all, the default) is heavy."""
HOLD_WEIGHT = 0.2
"""Weight of the newest hold time in a lane's running average."""
WAIT_MARGIN = 2.0
"""A newcomer queues only if its expected wait, times this, is within `max_wait_s`: the
measured pace moves with the host's load, and a waiter the estimate got wrong is answered
503 only after the whole bound."""
UNMEASURED_ROUNDS = 4
"""Until a lane has measured its pace, at most this many rounds (one request per general slot,
also for the heavy lane) wait:
30 readers at once on 8 slots are all served (tests/load/test_upload_pressure.py); the first
wave of 1,000 readers queued 256 and answered the later ones after the whole 20 s."""
PACE_ROUNDS = 4
"""A lane's pace is measured over its last grants, at most this many rounds of them: grants
come in bursts (a few slots freed in one turn of the loop, then a gap), and a running average
weighted per grant read ~0 right after a burst (835 waiters timed out in one run)."""
REJUDGE_S = 0.25
"""How often a lane with waiters judges them again (`AdmissionMiddleware._rejudge`): a waiter
whose expected wait passes what its bound has left is answered within this of that being
known."""
REPEAT_DELAY_MAX_S = 5.0
"""The longest a connection's early return after a 503 is held (see `_hold`):
well within a client's time-out (60 s is common)."""


@dataclass(eq=False)
class Waiter:
    """A request queued for a slot: `future` is given a result when a slot is handed to it, or
    Busy when it is refused where it waits; `deadline` (time.monotonic) is when its bound ends."""

    future: asyncio.Future[None]
    deadline: float


class Slots:
    """A lane's slots, handed out in the order requests queued for them (as asyncio's
    Semaphore does), where a waiter can also be taken out of the queue and refused: the
    semaphore's waiters cannot be told apart, nor their place in the queue known."""

    def __init__(self, limit: int) -> None:
        self.free = limit
        self.queue: deque[Waiter] = deque()

    def locked(self) -> bool:
        """Every slot taken, or someone queued for the next one."""
        return self.free == 0 or bool(self.queue)

    def take(self) -> bool:
        """Take a free slot at once (the caller does not yield), if there is one."""
        if self.locked():
            return False
        self.free -= 1
        return True

    def give_back(self) -> None:
        """Hand the slot to the first waiter, or free it."""
        while self.queue:
            waiter = self.queue.popleft()
            if not waiter.future.done():
                waiter.future.set_result(None)
                return
        self.free += 1


@dataclass
class Lane:
    """Slots of one kind of request, those waiting for one, and how long a slot is held."""

    limit: int
    slots: Slots | None = None  # made in the server's event loop
    waiting: int = 0
    hold_s: float = 0.0
    """Running average of the time a request held its slot (0 until one was released); kept
    when the queue empties, for the next wave."""
    wait_s: float = 0.0
    """Running average of the time a request waited for its slot, as it was measured."""
    grants: deque[float] = field(default_factory=deque)
    """When the last queued requests got their slot (at most PACE_ROUNDS rounds of them),
    since the queue last formed: the lane's measured pace (`pace_s`)."""
    since: float = 0.0
    """When the queue formed, or the last grant dropped from `grants`."""
    holding: list[float] = field(default_factory=list)
    """When each request that holds a slot now took it."""
    tick: asyncio.TimerHandle | None = None
    """The next `_rejudge` of this lane's waiters, while it has some."""

    def waited(self, took: float) -> None:
        self.wait_s = (1 - HOLD_WEIGHT) * self.wait_s + HOLD_WEIGHT * took

    def queueing(self, now: float) -> None:
        """A request starts to wait at `now`: a queue that forms measures its pace anew."""
        if not self.waiting:
            self.grants.clear()
            self.since = now

    def granted(self, now: float) -> None:
        """A queued request got its slot at `now`."""
        if not self.waiting:  # the last waiter: the queue is gone
            self.grants.clear()
            return
        self.grants.append(now)
        while len(self.grants) > PACE_ROUNDS * self.limit:
            self.since = self.grants.popleft()

    def pace_s(self, now: float) -> float:
        """The time a place in the queue takes: from the queue's forming (or the last grant
        dropped from the window) to `now`, over the grants since (at least one round of them;
        0: not measured). The first round comes as one burst when the slots held on arrival
        free together: measured from the burst alone it read ~0 (786 waiters timed out in one
        run); a queue that has not moved since counts as slower."""
        if len(self.grants) < self.limit:
            return 0.0
        return (now - self.since) / len(self.grants)

    def hold_at(self, now: float) -> float:
        """The hold time to reckon with: the measured one, or more while the slots' current
        holders have held theirs longer already (their lower median: one long request among
        many short ones does not count; before the first release, the only measure)."""
        held = sorted(now - started for started in self.holding)
        return max(self.hold_s, held[(len(held) - 1) // 2] if held else 0.0)

    def waits(self, places: int, now: float) -> list[float]:
        """The expected wait at each of the first `places` places in the queue: the place
        times the measured pace; until that is measured, the slots free when their holders'
        time is up (`hold_at`), then a hold later each, round after round."""
        pace = self.pace_s(now)
        if pace:
            return [pace * place for place in range(1, places + 1)]
        hold = self.hold_at(now)
        free = sorted(max(0.0, hold - (now - started)) for started in self.holding)
        free += [0.0] * (self.limit - len(free))  # slots taken that no holder is noted for
        return [free[at % self.limit] + at // self.limit * hold for at in range(places)]

    def expected_wait_s(self) -> float:
        """What a request arriving now would wait: nothing with a slot free; else the wait at
        its place in the queue (`waits`)."""
        if self.slots is None or not self.slots.locked():
            return 0.0
        return self.waits(self.waiting + 1, time.monotonic())[-1]

    def release(self, started: float, served: bool = True) -> None:
        """Give the slot taken at `started` back; not `served`: the request was refused or
        cancelled while it waited for its next lane, so its time is no hold time of this
        lane's."""
        assert self.slots is not None
        self.slots.give_back()
        self.holding.remove(started)
        if not served:
            return
        took = time.monotonic() - started
        self.hold_s = took if self.hold_s == 0 else (
            (1 - HOLD_WEIGHT) * self.hold_s + HOLD_WEIGHT * took)


class Busy(Exception):
    """A lane refused a request: why, and after how many seconds to come back."""

    def __init__(self, why: str, retry_after_s: int) -> None:
        super().__init__(why)
        self.why, self.retry_after_s = why, retry_after_s


class AdmissionMiddleware:
    """Admit at most `limit` HTTP requests into `app` at once (`heavy_limit` of them whole-board
    reads); a request whose expected wait (times WAIT_MARGIN) passes `max_wait_s`, or that
    finds `max_waiting` waiting, is answered 503 with Retry-After at once; one that queued is
    answered so as soon as its expected wait passes what its bound has left (`withdrawn`), or
    else at the bound (`late`)."""

    def __init__(self, app: ASGIApp, limit: int, max_waiting: int | None = None,
                 max_wait_s: float = 20.0, internal_limit: int = 4,
                 retry_after_s: int = 5, heavy_limit: int | None = None,
                 target_wait_s: float | None = None) -> None:
        self.app = app
        self.limit = limit
        self.max_waiting = 8 * limit if max_waiting is None else max_waiting
        self.max_wait_s = max_wait_s
        self.target_wait_s = max_wait_s / 4 if target_wait_s is None else target_wait_s
        self.retry_after_s = retry_after_s
        self.general = Lane(limit)
        self.heavy = Lane(max(2, limit // 16) if heavy_limit is None else heavy_limit)
        self.internal = Lane(internal_limit)
        self.shed = 0
        """Requests answered 503 so far (a benchmark reads it to see shedding happen)."""
        self.delayed = 0
        """Requests held until their connection's Retry-After was due (`_hold`)."""
        self.late = 0
        """Requests admitted to a queue and refused after the whole `max_wait_s`: the ones
        the expected wait got wrong."""
        self.withdrawn = 0
        """Requests admitted to a queue and refused there before the bound, once their
        expected wait passed what the bound had left (`_rejudge`)."""
        self._due: dict[object, float] = {}
        """When each refused connection (the client's address and port) was told to return."""

    @property
    def waiting(self) -> int:
        """Requests waiting for a slot in the general or the heavy lane."""
        return self.general.waiting + self.heavy.waiting

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _is_streamed_upload(scope):
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if path.startswith(INTERNAL_PREFIX):
            started = await self._enter(self.internal, shed=False)
            try:
                await self.app(scope, receive, send)
            finally:
                self.internal.release(started)
            return
        lanes = [self.heavy, self.general] if _is_heavy(scope, path) else [self.general]
        held = False
        while True:
            entered: list[tuple[Lane, float]] = []
            deadline = time.monotonic() + self.max_wait_s  # one bound for all its lanes
            try:
                for lane in lanes[1:]:  # judged on arrival too: a whole-board read refused by
                    self._judge(lane)  # the general lane only after its wait for a heavy slot
                for at, lane in enumerate(lanes):  # (up to max_wait_s) had its 503 after
                    entered.append((lane, await self._enter(  # that wait; judged then,
                        lane, shed=True, deadline=deadline, judge=not at)))  # it waits on
                break
            except Busy as busy:
                for lane, started in reversed(entered):
                    lane.release(started, served=False)
                if not held and await self._hold(scope):
                    held = True  # came back before its Retry-After: judged again when due
                    continue
                await self._refuse(scope, send, busy)
                return
            except BaseException:  # cancelled while waiting (shutdown, a disconnect): the
                for lane, started in reversed(entered):  # whole-board slot already taken goes
                    lane.release(started, served=False)  # back, or two such leaks would close
                raise  # the heavy lane for good
        try:
            await self.app(scope, receive, send)
        finally:
            for lane, started in reversed(entered):
                lane.release(started)

    async def _enter(self, lane: Lane, shed: bool, deadline: float = 0.0,
                     judge: bool = True) -> float:
        """Take a slot of `lane` (waiting for it if worth it, until `deadline` when shed: a
        whole-board read's wait for a heavy slot counts in its bound); the time it was taken."""
        if lane.slots is None:
            lane.slots = Slots(lane.limit)
        if lane.slots.take():
            # A free slot is taken here, before this task yields: through `wait_for` (a task
            # of its own before Python 3.12) it was taken a turn of the loop later, so every
            # request of a burst parsed in one turn found the lane free, none was judged, and
            # all but `limit` of them waited the whole bound (721 of a 1,000-reader wave).
            taken = time.monotonic()
            lane.holding.append(taken)
            lane.waited(0.0)
            return taken
        if shed and judge:
            self._judge(lane)
        arrived = time.monotonic()  # every slot taken: this request queues
        lane.queueing(arrived)
        lane.waiting += 1
        loop = asyncio.get_running_loop()
        waiter = Waiter(loop.create_future(), deadline if shed else math.inf)
        lane.slots.queue.append(waiter)
        expiry = loop.call_later(max(0.0, deadline - arrived), self._expire, lane, waiter) \
            if shed else None
        if shed and lane.tick is None:
            lane.tick = loop.call_later(REJUDGE_S, self._rejudge, lane)
        try:
            await waiter.future
        except BaseException as exc:
            lane.waiting -= 1
            future = waiter.future
            if future.done() and not future.cancelled() and future.exception() is None:
                lane.slots.give_back()  # handed a slot as it was cancelled: the next one's
            elif waiter in lane.slots.queue:
                lane.slots.queue.remove(waiter)
            if not lane.waiting:  # emptied without a grant (time-outs, cancels):
                lane.grants.clear()  # the next queue measures its own pace
            if isinstance(exc, Busy):  # refused where it waited (`_rejudge`, `_expire`)
                lane.waited(time.monotonic() - arrived)
            raise
        finally:
            if expiry is not None:
                expiry.cancel()
        lane.waiting -= 1
        admitted = time.monotonic()
        lane.holding.append(admitted)
        lane.waited(admitted - arrived)
        lane.granted(admitted)
        return admitted

    def _expire(self, lane: Lane, waiter: Waiter) -> None:
        """The waiter's bound is up and no slot freed for it: 503 now (`late`)."""
        assert lane.slots is not None
        if waiter.future.done():
            return
        lane.slots.queue.remove(waiter)
        self.late += 1
        waiter.future.set_exception(Busy(f"no slot freed within {self.max_wait_s:g} s",
                                         self._retry_after(lane.expected_wait_s())))

    def _rejudge(self, lane: Lane) -> None:
        """Refuse each waiter whose expected wait at its place in the queue (`Lane.waits`) has
        passed what its bound has left; the places behind it move up. Again in REJUDGE_S while
        any wait: before a lane has measured a release, the hold time it reckons with grows
        with its holders' time (`Lane.hold_at`)."""
        lane.tick = None
        if lane.slots is None or not lane.slots.queue:
            return
        now = time.monotonic()
        waits = lane.waits(len(lane.slots.queue), now)
        kept: deque[Waiter] = deque()
        for waiter in lane.slots.queue:
            expected = waits[len(kept)]
            if waiter.future.done():
                continue
            if expected <= waiter.deadline - now:
                kept.append(waiter)
                continue
            self.withdrawn += 1
            waiter.future.set_exception(Busy(
                f"the expected wait grew to {expected:.0f} s while it waited, past its "
                f"{self.max_wait_s:g} s bound", self._retry_after(expected)))
        lane.slots.queue = kept
        if kept:
            lane.tick = asyncio.get_running_loop().call_later(REJUDGE_S, self._rejudge, lane)

    def _judge(self, lane: Lane) -> None:
        """Raise Busy if a request arriving now at `lane` is refused before it waits."""
        if lane.slots is None or not lane.slots.locked():
            return
        expected = lane.expected_wait_s()
        if lane.waiting >= self.max_waiting:
            raise Busy(f"{lane.waiting} requests are already waiting",
                       self._retry_after(expected))
        if lane.waiting >= lane.limit and lane.wait_s > self.target_wait_s:
            raise Busy(f"requests waited {lane.wait_s:.1f} s of late",
                       self._retry_after(max(expected, lane.wait_s)))
        if expected * WAIT_MARGIN > self.max_wait_s:
            raise Busy(f"the expected wait is {expected:.0f} s",
                       self._retry_after(expected))
        if lane.waiting >= UNMEASURED_ROUNDS * self.limit and not lane.pace_s(time.monotonic()):
            raise Busy(f"the lane's pace is not measured yet ({lane.waiting} waiting)",
                       self._retry_after(expected))

    def _retry_after(self, expected_s: float) -> int:
        """Come back when the queue ahead should have drained: at least `retry_after_s`."""
        return max(self.retry_after_s, min(600, math.ceil(expected_s)))

    async def _hold(self, scope: Scope) -> bool:
        """Wait until this connection's Retry-After is due (at most REPEAT_DELAY_MAX_S), if it
        was refused before and came back early; whether it did.

        A client that ignores Retry-After and asks again at once was the whole overload at
        1,000 readers: each refused request was parsed, routed and answered by the one event
        loop, ~1,000-1,400 a second on 2 cores, and the workers' API and the uploads waited a
        turn of that loop at every step (a heartbeat 0.5 -> 1.7-4.5 s p50). Held until it was
        told to come back, then judged as if it came then, such a connection sends one request
        per Retry-After (a sleeping coroutine, no slot, no session); a client that honours
        Retry-After, and any new connection, is never held. The connection is the client's
        address and port; port 0 is an address a proxy's headers gave (uvicorn's
        proxy_headers), which many clients may share: none of them is held for another."""
        client = scope.get("client")
        if not client or not client[1]:
            return False
        wait = self._due.get(client, 0.0) - time.monotonic()
        if wait <= 0:
            return False
        self.delayed += 1
        await asyncio.sleep(min(wait, REPEAT_DELAY_MAX_S))
        return True

    async def _refuse(self, scope: Scope, send: Send, busy: Busy) -> None:
        """Answer 503 with Retry-After at once, and note when this connection may come back."""
        self.shed += 1
        client = scope.get("client")
        if client and client[1]:
            now = time.monotonic()
            if len(self._due) > 4 * (self.max_waiting + self.limit) + 1024:
                self._due = {c: d for c, d in self._due.items() if d > now}
            self._due[client] = now + busy.retry_after_s
        body = json.dumps({"error": {
            "code": "server.busy", "family": "platform",
            "message": f"the server is busy ({busy.why}); retry after {busy.retry_after_s} s"}})
        headers = [(b"content-type", b"application/json"),
                   (b"retry-after", str(busy.retry_after_s).encode()),
                   (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": body.encode()})


def _is_heavy(scope: Scope, path: str) -> bool:
    """A read of a whole board (the API's default), of more than HEAVY_ROWS entries, or CSV."""
    if scope.get("method") != "GET" or not BOARD_API.match(path):
        return False
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    if query.get("format", [""])[-1] == "csv":
        return True
    limit = query.get("limit", [""])[-1]
    return not limit.isdigit() or int(limit) > HEAVY_ROWS


def _is_streamed_upload(scope: Scope) -> bool:
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            return bool(value.startswith(b"multipart/form-data"))
    return False
