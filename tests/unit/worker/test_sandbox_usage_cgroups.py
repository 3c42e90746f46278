"""Reading a container's usage from its parent cgroup (worker/sandbox_usage.py, issue 38.6),
on both layouts: cgroup v1 (one folder per controller) and v2 (one unified tree)."""

from __future__ import annotations

from pathlib import Path

from worker.sandbox_usage import read_usage, remove_parent, usage_parent

PARENT = "/arena-usage/run-1-meta-test-abc"


def test_cgroup_v1_counters_are_read_and_the_parent_removed(tmp_path: Path):
    memory = tmp_path / "memory" / PARENT.strip("/")
    cpu = tmp_path / "cpu,cpuacct" / PARENT.strip("/")
    memory.mkdir(parents=True)
    cpu.mkdir(parents=True)
    (tmp_path / "cpuacct").symlink_to(tmp_path / "cpu,cpuacct")
    (memory / "memory.max_usage_in_bytes").write_text(f"{300 * 2**20}\n")
    (cpu / "cpuacct.usage").write_text("2500000000\n")
    usage = read_usage(PARENT, tmp_path)
    assert (usage.cpu_s, usage.peak_memory_mb) == (2.5, 300.0)
    for path in (memory, cpu):
        for file in path.iterdir():
            file.unlink()  # a real cgroup folder's files go with it
    remove_parent(PARENT, tmp_path)
    assert not memory.exists() and not cpu.exists()


def test_cgroup_v2_counters_are_read(tmp_path: Path):
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    group = tmp_path / PARENT.strip("/")
    group.mkdir(parents=True)
    (group / "memory.peak").write_text(f"{64 * 2**20}\n")
    (group / "cpu.stat").write_text("usage_usec 1250000\nuser_usec 1000000\nsystem_usec 250000\n")
    usage = read_usage(PARENT, tmp_path)
    assert (usage.cpu_s, usage.peak_memory_mb) == (1.25, 64.0)


def test_nothing_is_guessed_without_a_readable_cgroup(tmp_path: Path):
    assert read_usage(None, tmp_path).cpu_s is None
    assert read_usage(PARENT, tmp_path).peak_memory_mb is None

    class Systemd:
        def info(self) -> dict:
            return {"CgroupDriver": "systemd"}

    assert usage_parent(Systemd()) is None
