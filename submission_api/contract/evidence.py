"""Evidence of an out-of-memory kill where no container engine reports one: the cgroup v2
`memory.events` counter `oom_kill` of the cgroup this process runs in (on cgroup v1, the same
counter in `memory.oom_control`). It counts every process the OOM killer ended in that cgroup,
so a rise across a stage says the kernel, not someone's `kill -9`, ended a process of it. Where
neither can be read it is None: no evidence.
"""

from __future__ import annotations

from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def read_oom_kills(proc_cgroup: Path = Path("/proc/self/cgroup"),
                   root: Path = CGROUP_ROOT) -> int | None:
    """The `oom_kill` count of our cgroup, or None where it cannot be read."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return None
    candidates = []
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if "memory" in controllers.split(","):
            candidates.append(root / "memory" / path.lstrip("/") / "memory.oom_control")
        elif line.startswith("0::"):
            candidates.append(root / path.lstrip("/") / "memory.events")
    for events in candidates:
        count = _oom_kill_count(events)
        if count is not None:
            return count
    return None


def _oom_kill_count(events: Path) -> int | None:
    try:
        text = events.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip().isdigit():
            return int(value)
    return None


def oom_kill_rose(before: int | None, after: int | None) -> bool:
    """Whether the OOM killer ended a process between two readings of `read_oom_kills`."""
    return before is not None and after is not None and after > before
