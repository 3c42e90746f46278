"""Overload with a lean client (issue 38.5): 1,000 readers that ignore Retry-After, uploaders and
the workers' API against the real server, measured per class of answer from one asyncio process
of raw HTTP/1.1 sockets, run at nice 19 so that it does not take the server's share of the CPU.

    .venv/bin/python benchmarks/bench_overload.py --postgres [--readers 1000] [--uploaders 30]
        [--internal 4] [--seconds 40] [--quiet-seconds 10] [--trees A,B --rounds 2] [--json out]

`load_platform.py`'s mixed form drives the same server from 1,000 httpx threads: on 2 cores
that client took 0.7-1.4 cores, 3-5.5x the server's CPU, and the 503s' p95 (21-33 s) was
mostly the client's own queue for the GIL. Here one event loop (uvloop when installed) writes
each request as prepared bytes and reads the answer by its Content-Length; its CPU and the
server's are both reported, with the server's share of the whole run.

Each round: the server (as `arena serve` runs it, plus a probe of its loop's lag) is seeded like
`load_platform.py` (10,000 finished submissions on one open phase); then `--quiet-seconds` with
only the uploaders and the workers' probers (their quiet latency), then `--seconds` with the
readers as well. Reported per phase and class: readers answered 200, readers answered 503 (on
arrival / while they waited, once their expected wait passed their bound / after the whole
wait), uploads (201, or 429 from the upload gate), the workers' API
(a heartbeat with a token no run has: its lane, the app and the run's lookup, answered 401),
client time-outs and any other status. `--trees` runs the same rounds against other checkouts
(a `git worktree` of an older commit), alternating, so that before and after meet the same host.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import load_platform as lp  # noqa: E402

REASONS = (("queue_full", b"already waiting"), ("expected_wait", b"the expected wait"),
           ("measured_wait", b"s of late"), ("unmeasured", b"not measured yet"))
"""Why admission refused a reader on arrival (its 503's message), as the report splits them."""


@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=dict)
    other: dict[str, int] = field(default_factory=dict)

    def add(self, kind: str, seconds: float) -> None:
        self.latencies.setdefault(kind, []).append(seconds)

    def table(self, seconds: float) -> dict[str, dict[str, float]]:
        rows = {}
        groups = dict(self.latencies)
        on_arrival = [v for k, values in groups.items()
                      if k.startswith("read_503 ") and not k.endswith(" connect")
                      for v in values]
        if on_arrival:
            groups["read_503"] = on_arrival  # every reason together
        repeats = [v for k, values in groups.items() if k.startswith("read_503_repeat ")
                   for v in values]
        if repeats:  # early repeats (before their Retry-After), held by design: apart
            groups["read_503_repeat"] = repeats
        for kind, values in sorted(groups.items()):
            ordered = sorted(values)
            rows[kind] = {"n": len(ordered), "per_s": round(len(ordered) / seconds, 1),
                          "p50_ms": round(1000 * statistics.median(ordered), 1),
                          "p95_ms": round(1000 * ordered[int(0.95 * (len(ordered) - 1))], 1),
                          "max_ms": round(1000 * ordered[-1], 1)}
        return rows


class Connection:
    """One keep-alive HTTP/1.1 connection; reconnects when the server closes it."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.connect_s: float | None = None
        """How long the last request's new connection took to open (None: kept alive)."""
        self.writer: asyncio.StreamWriter | None = None
        self.port_used = 0
        """The local port of the connection (the server's trace names connections by it)."""
        self.marks: list[float] = []
        """The last request's times (CLOCK_MONOTONIC, as the server's trace): connected,
        written, its answer's head read."""

    async def request(self, raw: bytes) -> tuple[int, bytes, bytes]:
        """Send `raw`; (status, header block, body)."""
        self.connect_s = None
        if self.writer is None or self.writer.is_closing():
            started = time.perf_counter()
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
            self.connect_s = time.perf_counter() - started
            self.port_used = (self.writer.get_extra_info("sockname") or ("", 0))[1]
        assert self.reader is not None
        connected = time.monotonic()
        self.writer.write(raw)
        self.marks = [connected, time.monotonic()]
        head = await self.reader.readuntil(b"\r\n\r\n")
        self.marks.append(time.monotonic())
        status = int(head[9:12])
        lower = head.lower()
        at = lower.find(b"content-length:")
        length = int(lower[at + 15:lower.find(b"\r\n", at)]) if at >= 0 else 0
        body = await self.reader.readexactly(length) if length else b""
        if b"connection: close" in lower:
            self.close()
        return status, head, body

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


def get(path: str, token: str) -> bytes:
    return (f"GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {token}\r\n"
            "accept: application/json\r\n\r\n").encode()


def post(path: str, token: str, body: bytes, content_type: str) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer {token}\r\n"
            f"content-type: {content_type}\r\ncontent-length: {len(body)}\r\n\r\n"
            ).encode() + body


def multipart(data: bytes) -> tuple[bytes, str]:
    boundary = f"bench{random.getrandbits(64):016x}"
    body = (f"--{boundary}\r\ncontent-disposition: form-data; name=\"file\"; filename=\"s.zip\""
            f"\r\ncontent-type: application/zip\r\n\r\n").encode() + data + (
            f"\r\n--{boundary}--\r\n").encode()
    return body, f"multipart/form-data; boundary={boundary}"


async def drive(base: str, phase_id: int, readers: list[str], uploaders: list[str],
                internal: int, quiet_s: float, loaded_s: float, timeout_s: float,
                internal_pause_s: float = 0.25, honour_retry_after: bool = False,
                trace: list | None = None) -> dict:
    """The quiet phase, then the loaded one; a Tally for each. With `trace`, each loaded
    reader's request is appended to it: [kind, local port, new connection, began, connected,
    written, head read, done] (CLOCK_MONOTONIC, as the server's trace)."""
    host, port_text = base.removeprefix("http://").split(":")
    port = int(port_text)
    tallies = {"quiet": Tally(), "loaded": Tally()}
    phase = {"name": "quiet"}
    stop, loaded = asyncio.Event(), asyncio.Event()
    paths = [f"/api/v1/phases/{phase_id}/leaderboard", "/api/v1/phases", "/"]

    async def one(conn: Connection, raw: bytes, classify, early: bool = False) -> str:  # noqa: ANN001
        """One request; `early`: a reader's repeat on a connection refused before, sent
        before its Retry-After (the server holds it until due: counted apart)."""
        tally = tallies[phase["name"]]
        started, began = time.perf_counter(), time.monotonic()
        try:
            status, head, body = await asyncio.wait_for(conn.request(raw), timeout_s)
        except TimeoutError:
            conn.close()
            tally.add("timeout", time.perf_counter() - started)
            return "timeout"
        except (ConnectionError, asyncio.IncompleteReadError, OSError) as exc:
            conn.close()
            key = f"{classify.__name__[:-5]} broken {type(exc).__name__}"
            tally.other[key] = tally.other.get(key, 0) + 1
            await asyncio.sleep(0.05)
            return key
        kind = classify(status, head, body)
        if early and kind.startswith("read_503 "):
            kind = "read_503_repeat " + kind[9:]
        tally.add(kind, time.perf_counter() - started)
        if conn.connect_s is not None:
            tally.add(f"{kind.split()[0]} connect", conn.connect_s)
        if trace is not None and phase["name"] == "loaded" and len(conn.marks) == 3:
            trace.append([kind, conn.port_used, conn.connect_s is not None, began, *conn.marks,
                          time.monotonic()])
        return kind

    retry_after_s = 5.0  # the server's least Retry-After; the header's own value is read below

    def read_kind(status: int, head: bytes, body: bytes) -> str:
        nonlocal retry_after_s
        lower = head.lower()
        if status == 503 and b"retry-after:" in lower:
            at = lower.find(b"retry-after:") + 12
            retry_after_s = float(lower[at:lower.find(b"\r\n", at)])
            if b"no slot freed" in body:
                return "read_503_after_wait"
            if b"while it waited" in body:
                return "read_503_while_waiting"
            why = next((w for w, m in REASONS if m in body), "other")
            return f"read_503 {why}"
        return "read_200" if status == 200 else f"read_{status}"

    def upload_kind(status: int, head: bytes, body: bytes) -> str:
        return {201: "upload", 429: "upload_429"}.get(status, f"upload_{status}")

    def internal_kind(status: int, head: bytes, body: bytes) -> str:
        return "internal" if status == 401 else f"internal_{status}"

    async def reader(token: str, slot: int) -> None:
        rng = random.Random(slot)
        conn = Connection(host, port)
        await loaded.wait()
        kind = ""
        while not stop.is_set():
            kind = await one(conn, get(rng.choice(paths), token), read_kind,
                             early=kind.startswith("read_503") and conn.writer is not None)
            if honour_retry_after and kind.startswith("read_503"):
                conn.close()  # idle past the server's keep-alive (5 s): a client reconnects
                await asyncio.sleep(retry_after_s)
        conn.close()

    async def uploader(token: str, slot: int) -> None:
        rng = random.Random(10_000 + slot)
        conn = Connection(host, port)
        while not stop.is_set():
            body, ctype = multipart(lp.zip_bytes(f"{slot}-{rng.random()}"))
            await one(conn, post(f"/api/v1/phases/{phase_id}/submissions", token, body, ctype),
                      upload_kind)
        conn.close()

    async def prober() -> None:
        conn = Connection(host, port)
        raw = post("/internal/runs/1/heartbeat", "not-a-run-token", b"{}", "application/json")
        while not stop.is_set():
            await one(conn, raw, internal_kind)
            await asyncio.sleep(internal_pause_s)
        conn.close()

    tasks = ([asyncio.create_task(prober()) for _ in range(internal)]
             + [asyncio.create_task(uploader(t, i)) for i, t in enumerate(uploaders)]
             + [asyncio.create_task(reader(t, i)) for i, t in enumerate(readers)])
    await asyncio.sleep(quiet_s)
    phase["name"] = "loaded"
    loaded.set()
    await asyncio.sleep(loaded_s)
    stop.set()
    await asyncio.wait(tasks, timeout=timeout_s + 5)
    for task in tasks:
        task.cancel()
    return {name: {"seconds": s, "by_class": t.table(s), "other": t.other}
            for (name, t), s in zip(tallies.items(), (quiet_s, loaded_s), strict=True)}


def one_round(tree: Path, postgres: bool, args: argparse.Namespace) -> dict:
    """Seed a server from `tree` and drive it; the client runs at nice 19 meanwhile."""
    with tempfile.TemporaryDirectory(prefix="arena-overload-") as tmp:
        folder = Path(tmp)
        trace: list | None = [] if args.trace else None
        with lp.database(postgres, folder) as url, lp.server(
                url, folder, tree=tree, trace=folder / "trace.jsonl" if args.trace else None
                ) as (base, admin):
            phase_id = lp.create_phase(base, admin)
            lp.bulk_insert(url, phase_id, 1000, args.submissions)
            accounts = lp.make_tokens(base, admin, "reader", min(args.readers,
                                                                  args.reader_accounts))
            readers = [accounts[i % len(accounts)] for i in range(args.readers)]
            uploaders = lp.make_tokens(base, admin, "uploader", args.uploaders)
            pid = lp.SERVER_PIDS[base]
            before = os.nice(0)
            os.nice(args.client_nice - before)  # for the drive; raising back needs root
            server_cpu, client_cpu = lp.cpu_seconds(pid), lp.cpu_seconds(os.getpid())
            wall, load = time.perf_counter(), os.getloadavg()[0]
            phases = runner()(drive(base, phase_id, readers, uploaders, args.internal,
                                    args.quiet_seconds, args.seconds, args.client_timeout,
                                    honour_retry_after=args.honour_retry_after,
                                    trace=trace))
            wall = time.perf_counter() - wall
            server_cpu = lp.cpu_seconds(pid) - server_cpu
            client_cpu = lp.cpu_seconds(os.getpid()) - client_cpu
            with contextlib.suppress(PermissionError):  # as root: the next round's server
                os.nice(before - args.client_nice)  # starts at the caller's priority
        lags = sorted(json.loads((folder / "lag.json").read_text() or "[]")) \
            if (folder / "lag.json").exists() else []
        log = (folder / "server.log").read_text(errors="replace").splitlines()
        where = breakdown(trace, (folder / "trace.jsonl").read_text().splitlines()) \
            if trace is not None and (folder / "trace.jsonl").exists() else None
    return {"where_ms": where,"tree": str(tree), "honour_retry_after": args.honour_retry_after,
            "client_nice": args.client_nice,
            "load_average": [round(load, 1), round(os.getloadavg()[0], 1)],
            "server_cpu_s": round(server_cpu, 1), "client_cpu_s": round(client_cpu, 1),
            "wall_s": round(wall, 1), "server_cores": round(server_cpu / wall, 2),
            "client_cores": round(client_cpu / wall, 2),
            "loop_lag_p95_ms": round(1000 * lags[int(0.95 * (len(lags) - 1))], 1) if lags else None,
            "loop_lag_max_ms": round(1000 * lags[-1], 1) if lags else None,
            "server_log_tail": log[-20:],
            **phases}


SEGMENTS = (("connect", "began", "connected"), ("to_accept", "connected", "accepted"),
            ("to_read", "sent", "read"), ("to_app", "read", "app"),
            ("admission", "app", "answered"), ("to_client", "written", "head"))
"""A reader's request, in order: the client began (and opened a connection if new), its
bytes were written; the server's loop accepted the connection, read the bytes, called the
app (h11 had parsed them), the app started the answer (admission's decision for a 503) and
handed its last byte to the socket; the client read the answer's head. `to_read` runs from
the later of the write and the accept."""


def breakdown(client: list[list], server_lines: list[str]) -> dict[str, dict]:
    """Where each reader's request spent its time, per class of answer: p50/p95 (ms) of each
    segment of SEGMENTS, joined on the client's port (the server's trace, `--trace`)."""
    by_port: dict[int, dict[str, list]] = {}
    for line in server_lines:
        row = json.loads(line)
        by_port.setdefault(row[1], {"c": [], "d": [], "r": []})[row[0]].append(row)
    groups: dict[str, dict[str, list[float]]] = {}
    unmatched = 0
    for kind, port, new, began, connected, written, head, done in client:
        rows = by_port.get(port, {"c": [], "d": [], "r": []})
        request = next((r for r in rows["r"] if began <= r[3] <= done), None)
        if request is None:
            unmatched += 1
            continue
        app, answered, end = request[3], request[4], request[6]
        read = max((d[2] for d in rows["d"] if d[2] <= app), default=app)
        accepted = max((c[2] for c in rows["c"] if c[2] <= app), default=began)
        times = {"began": began, "connected": connected if new else began,
                 "accepted": accepted if new else began, "sent": max(written, accepted)
                 if new else written, "read": read, "app": app, "answered": answered,
                 "written": end or answered, "head": head}
        name = kind.split()[0] + (" new" if new else "")
        group = groups.setdefault(name, {})
        for segment, start, stop in SEGMENTS:
            group.setdefault(segment, []).append(times[stop] - times[start])
        group.setdefault("total", []).append(head - began)
    out: dict[str, dict] = {"unmatched": {"n": unmatched}}
    for name, group in sorted(groups.items()):
        out[name] = {"n": len(group["total"])}
        for segment, values in group.items():
            ordered = sorted(values)
            out[name][segment] = [round(1000 * statistics.median(ordered)),
                                  round(1000 * ordered[int(0.95 * (len(ordered) - 1))])]
    return out


def runner():  # noqa: ANN201
    try:
        import uvloop

        return uvloop.run
    except ImportError:
        return asyncio.run


def brief(result: dict) -> str:
    """One line per round: the figures the issue's aim is about."""
    def cell(phase: str, kind: str) -> str:
        row = result[phase]["by_class"].get(kind)
        return "-" if row is None else f"{row['p50_ms'] / 1000:.2f}/{row['p95_ms'] / 1000:.2f}s" \
            f" n={row['n']}"
    loaded = result["loaded"]["by_class"]
    return (f"{Path(result['tree']).name}: load {result['load_average']} server "
            f"{result['server_cores']} core, client {result['client_cores']} | "
            f"internal quiet {cell('quiet', 'internal')} loaded {cell('loaded', 'internal')} | "
            f"upload quiet {cell('quiet', 'upload')} loaded {cell('loaded', 'upload')} | "
            f"read 200 {cell('loaded', 'read_200')} | 503 {cell('loaded', 'read_503')} | "
            f"while waiting {cell('loaded', 'read_503_while_waiting')} | "
            f"after wait {cell('loaded', 'read_503_after_wait')} | "
            f"early repeats {cell('loaded', 'read_503_repeat')} | "
            + " ".join(f"{k[9:]} {cell('loaded', k)}" for k in loaded if k.startswith("read_503 "))
            + " | "
            f"time-outs {loaded.get('timeout', {}).get('n', 0)} | "
            f"other {result['loaded']['other']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres", action="store_true")
    parser.add_argument("--submissions", type=int, default=10_000)
    parser.add_argument("--readers", type=int, default=1000)
    parser.add_argument("--reader-accounts", type=int, default=50)
    parser.add_argument("--uploaders", type=int, default=30)
    parser.add_argument("--internal", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=40)
    parser.add_argument("--quiet-seconds", type=float, default=10)
    parser.add_argument("--client-timeout", type=float, default=60)
    parser.add_argument("--trees", default=str(ROOT),
                        help="comma-separated checkouts to serve from, alternating")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--client-nice", type=int, default=19,
                        help="the client's niceness while it drives (19: it never takes the "
                             "server's CPU, but on a loaded host its own wake-ups lag)")
    parser.add_argument("--honour-retry-after", action="store_true",
                        help="readers wait a 503's Retry-After before asking again")
    parser.add_argument("--trace", action="store_true",
                        help="time each reader's request on both sides (see `breakdown`)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = []
    for _ in range(args.rounds):
        for tree in args.trees.split(","):
            result = one_round(Path(tree).resolve(), args.postgres, args)
            results.append(result)
            print(brief(result), flush=True)
            if result["where_ms"]:
                for name, row in result["where_ms"].items():
                    print(f"  where (p50/p95 ms) {name}: {row}", flush=True)
            if args.json:
                args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
