"""Before each run, the worker drops the host kernel's unused dentries and inodes (issue 34).

A run can look up names that do not exist in a folder of the image (`stat` fails, one name per
bit); the kernel keeps a negative dentry for each in the host's dcache (overlay2's lower layers
are the host's file system), and a later run times its lookups of the same names: 82-92% of
bits right between two containers (`benchmarks/bench_dentry_channel.py`). Writing 2 to
`/proc/sys/vm/drop_caches` frees every unused dentry and inode, negative ones included, so the
next run finds none of them. It is done before every run rather than only between accounts or
out of a secret phase: it costs well under the run's pre-fault (docs/internals.md), and the
worker need not know whose the previous run was.

Limits, said at start-up and in each run's isolation line: it needs root on the host with
/proc/sys writable (a worker in a container without it cannot), it acts on this kernel only (a
remote Docker engine's host is not reset), and runs overlapping in concurrent slots share the
dcache while they run: a reset cannot separate them, so a secret phase's run has the host alone
(worker/host_lock.py).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)
DROP_CACHES = Path("/proc/sys/vm/drop_caches")
RECORD = "dentry_reset"
"""The file in a run's answers folder (the worker's own, 0700) that carries the reset's line to
the run's isolation record (`worker.pipeline.score.read_isolation`)."""
UNAVAILABLE_WARNING = (
    "this worker cannot reset the host's dentry cache between runs ({why}): a run can leave "
    "bits in which names were looked up (negative dentries) for a later run of another "
    "account, out of a secret phase too; each run's isolation line says it was not reset. Run "
    "the worker as root on the host with /proc/sys writable (docs/internals.md)")
CONCURRENT_WARNING = (
    "this worker runs {slots} slots at once: the dentry cache is reset before each run, but "
    "ordinary runs overlapping on this host share it while they run, and no reset can separate "
    "them; a run of a secret phase has the host alone (worker/host_lock.py; several workers on "
    "one host must share ARENA_WORKER_HOST_LOCK, docs/internals.md)")


@dataclass(frozen=True)
class DentryReset:
    """One attempt: done or why not, and how long the write took."""

    done: bool
    seconds: float = 0.0
    why: str = ""

    @property
    def line(self) -> str:
        """The run's isolation line's part."""
        if self.done:
            return f"dentry cache reset before the run ({self.seconds:.2f} s)"
        return f"dentry cache NOT reset before the run ({self.why})"


def unavailable_reason(path: Path | None = None) -> str | None:
    """Why this process cannot reset the dentry cache (None: it can, as far as access says)."""
    path = path or DROP_CACHES
    if not path.exists():
        return f"{path} does not exist"
    if not os.access(path, os.W_OK):
        return f"{path} is not writable by this process (not root on the host, or /proc/sys " \
               "read-only)"
    return None


def reset_dentries(path: Path | None = None) -> DentryReset:
    """Drop the kernel's unused dentries and inodes (not the page cache of files in use)."""
    path = path or DROP_CACHES
    began = time.monotonic()
    try:
        with path.open("w") as sink:
            sink.write("2\n")
    except OSError as exc:
        return DentryReset(False, why=f"writing {path} failed: {exc.strerror or exc}")
    return DentryReset(True, seconds=time.monotonic() - began)


def reset_before_run(enabled: bool, answers_dir: Path | None,
                     path: Path | None = None) -> DentryReset:
    """The reset before one run, logged and written to its answers folder for its record."""
    outcome = reset_dentries(path) if enabled else DentryReset(False, why="disabled by "
                                                                          "ARENA_WORKER_RESET_DENTRIES")
    log.info("run.dentry_reset", extra={"done": outcome.done, "seconds": round(outcome.seconds, 3),
                                        "why": outcome.why})
    if answers_dir is not None and answers_dir.is_dir():
        (answers_dir / RECORD).write_text(outcome.line)
    return outcome


def read_record(answers_dir: Path) -> str | None:
    """The reset's line for this run (None: the executor never got there)."""
    try:
        return (answers_dir / RECORD).read_text()[:300] or None
    except OSError:
        return None


def check_dentry_reset(enabled: bool, slots: int, path: Path | None = None) -> str | None:
    """At start-up: a WARNING when runs here will not be separated (off, not possible, or
    concurrent slots); returns the reason it cannot reset (None: it can)."""
    why = unavailable_reason(path) if enabled else "ARENA_WORKER_RESET_DENTRIES is off"
    if why is not None:
        log.warning("worker.dentry_reset_unavailable: %s", UNAVAILABLE_WARNING.format(why=why))
    elif slots > 1:
        log.warning("worker.dentry_reset_concurrent: %s", CONCURRENT_WARNING.format(slots=slots))
    else:
        log.info("worker.dentry_reset: the host's dentry cache is reset before each run")
    return why
