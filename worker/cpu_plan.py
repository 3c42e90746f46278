"""Which host cores each pool slot owns, and the start-up check that a worker does not promise
its slots more cores than its host has (issue 38.3).

A CPU quota alone lets every slot's sandbox run on every core: on a host with more runnable
work than cores, runs starve one another and the host's other processes starve them. Pinning
(`ARENA_WORKER_CPUS_PER_SLOT`) gives slot i its own group of cores (`--cpuset-cpus`); a worker
whose slots would share cores refuses to start, and a run that asks for more CPUs than its
slot's cores is handed back (`worker.pipeline.execute.build_request`), never squeezed in.
"""

from __future__ import annotations

import os

from worker.settings import WorkerSettings


def host_cores(settings: WorkerSettings) -> list[int]:
    """The cores the worker may give its slots: the configured ones, else every core this
    process may run on (its affinity, which a container or `taskset` may have narrowed)."""
    if settings.host_cpus:
        return sorted(set(settings.host_cpus))
    return sorted(os.sched_getaffinity(0))


def check_cpu_plan(settings: WorkerSettings, cores: list[int] | None = None) -> None:
    """Raise ValueError (one line with the fix) when the slots need more cores than there are.

    Pinned: `pool_size x cpus_per_slot` cores; unpinned: at least one core per slot.
    """
    cores = host_cores(settings) if cores is None else cores
    per_slot = settings.cpus_per_slot or 1
    wanted = settings.pool_size * per_slot
    if wanted > len(cores):
        setting = ("ARENA_WORKER_CPUS_PER_SLOT" if settings.cpus_per_slot
                   else "one core per slot")
        raise ValueError(
            f"this worker has {settings.pool_size} slot(s) x {per_slot} core(s) "
            f"({setting}) = {wanted} cores, but only {len(cores)} core(s) {cores} to give them: "
            "concurrent runs would starve each other and be charged for it; lower "
            "ARENA_WORKER_CONCURRENCY (or the GPUs listed) or ARENA_WORKER_CPUS_PER_SLOT, or "
            "name more ARENA_WORKER_HOST_CPUS")


def slot_cpuset(settings: WorkerSettings, slot: int, cores: list[int] | None = None) -> str | None:
    """The `--cpuset-cpus` value of pool slot `slot` ("2,3"); None without pinning."""
    if not settings.cpus_per_slot:
        return None
    cores = host_cores(settings) if cores is None else cores
    per_slot = settings.cpus_per_slot
    first = (slot % settings.pool_size) * per_slot
    mine = cores[first:first + per_slot]
    if len(mine) < per_slot:
        raise ValueError(f"slot {slot} has {len(mine)} of its {per_slot} cores; "
                         f"check_cpu_plan should have refused this worker")
    return ",".join(str(core) for core in mine)
