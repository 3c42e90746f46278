"""One participant-side process under a wall-clock limit, its logs kept to head and tail: the
one helper `arena run` (`submission_api.runner.local`) and the worker's unsandboxed local mode
(`worker.local_executor`) run a stage with. It reports facts only (exit code, limit hit,
cancelled, seconds, OOM evidence, capped logs); `submission_api.contract.verdict` decides.

The process gets its own session, so on expiry or cancel its whole group is SIGKILLed. Its
output is read through pipes into bounded buffers, so a flood fills neither memory nor disk;
a leftover holding a pipe open is given a few seconds, never the run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from submission_api.contract.evidence import oom_kill_rose, read_oom_kills
from submission_api.log_text import HeadTailBuffer

POLL_S = 0.2
PUMP_GRACE_S = 5.0
"""How long the log pumps may outlive the process (a leftover child holding the pipe)."""


@dataclass(frozen=True)
class LimitedRun:
    exit_code: int
    """`subprocess`'s return code: -n for a death by signal n."""
    timed_out: bool
    cancelled: bool
    seconds: float
    oom_killed: bool
    """Evidence only: the OOM killer ended a process of our cgroup meanwhile."""
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool


def _pump(stream: IO[bytes], kept: HeadTailBuffer,
          on_output: Callable[[bytes], None] | None) -> None:
    # read1: whatever the pipe holds now (read would wait for 64 KiB), so output is seen live.
    for chunk in iter(lambda: stream.read1(1 << 16), b""):  # type: ignore[attr-defined]
        kept.append(chunk)
        if on_output is not None:
            on_output(chunk)


def run_limited(command: Sequence[str], *, env: Mapping[str, str], time_limit_s: float | None,
                log_cap_bytes: int, cwd: Path | None = None,
                cancel: threading.Event | None = None,
                on_poll: Callable[[], None] | None = None,
                on_output: Callable[[bytes], None] | None = None) -> LimitedRun:
    """Run `command` until it exits, `time_limit_s` passes (None: no limit) or `cancel` is set.

    Each of stdout and stderr keeps its first and last `log_cap_bytes / 2` bytes; `on_output`
    (called from the pump threads) also receives every chunk of either as it arrives.
    """
    oom_before = read_oom_kills()
    started = time.monotonic()
    process = subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, cwd=cwd, env=dict(env),
                               start_new_session=True)  # its own group, so children die with it
    kept = (HeadTailBuffer(log_cap_bytes), HeadTailBuffer(log_cap_bytes))
    pumps = [threading.Thread(target=_pump, args=(stream, buffer, on_output), daemon=True)
             for stream, buffer in zip((process.stdout, process.stderr), kept, strict=True)]
    for pump in pumps:
        pump.start()
    timed_out = cancelled = False
    while True:
        try:
            process.wait(timeout=POLL_S)
            break
        except subprocess.TimeoutExpired:
            pass
        if on_poll is not None:
            on_poll()
        timed_out = time_limit_s is not None and time.monotonic() - started > time_limit_s
        cancelled = cancel is not None and cancel.is_set()
        if timed_out or cancelled:
            with contextlib.suppress(ProcessLookupError):  # already gone
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            break
    seconds = time.monotonic() - started
    if on_poll is not None:
        on_poll()
    for pump in pumps:
        pump.join(PUMP_GRACE_S)
    return LimitedRun(exit_code=process.returncode, timed_out=timed_out,
                      cancelled=cancelled and not timed_out, seconds=seconds,
                      oom_killed=oom_kill_rose(oom_before, read_oom_kills()),
                      stdout=kept[0].text(), stderr=kept[1].text(),
                      stdout_truncated=kept[0].truncated, stderr_truncated=kept[1].truncated)
