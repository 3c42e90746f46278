"""How a test task's process keeps its memory (issue 19; docs/performance.md, "Fresh pages").

A task's process lives for one task, so what it frees may as well stay with it. glibc's defaults
hand every freed block above ~128 KiB (up to 32 MiB as its threshold adapts) back to the kernel
and take fresh, zero-filled pages for the next one: a ResNet's activations then fault in anew at
every layer, about a third of a protonet task's time on the CPU. One process shared by all tasks
(the reference kit) amortises that after its first tasks; a fresh process per task cannot carry
memory over, and must not (a task's freed heap is a channel to the next), but it can reuse its
own within the task, and take pages 2 MiB at a time (one fault instead of 512) by asking glibc
for transparent huge pages. Both settings are constants: they carry nothing between tasks.
"""

from __future__ import annotations

import ctypes
import os

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # <malloc.h>
MMAP_THRESHOLD = 1 << 30
"""Blocks up to 1 GiB come from the heap and are reused after free (glibc's own cap is 32 MiB)."""
TRIM_THRESHOLD = (1 << 31) - 1
"""Freed memory at the heap's top stays mapped: the process ends with its task anyway."""
HUGE_PAGES = "glibc.malloc.hugetlb=1"
"""glibc asks for transparent huge pages on what it maps (`madvise(MADV_HUGEPAGE)`); read at
exec, so it goes into the environment of the process that the fork server is forked from."""
MADV_COLLAPSE = 25
HUGE_PAGE = 1 << 21


def with_huge_pages(env: dict[str, str]) -> dict[str, str]:
    """`env` with glibc's huge-page tunable added (to what an operator already set there)."""
    tunables = env.get("GLIBC_TUNABLES", "")
    if HUGE_PAGES in tunables.split(":"):
        return env
    return {**env, "GLIBC_TUNABLES": ":".join(t for t in (tunables, HUGE_PAGES) if t)}


def keep_freed_memory() -> bool:
    """Have this process's allocator reuse what it frees instead of returning it to the kernel;
    False where the C library has no `mallopt` (macOS) or refuses the settings (musl)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


def collapse_anonymous_memory() -> int:
    """Back this process's private anonymous memory with 2 MiB pages now (`MADV_COLLAPSE`,
    Linux 6.1+); returns the bytes collapsed (0 where refused).

    For the fork server, once preloaded (issue 38.1): every test task costs two forks of it (the
    task's reaper, then the task's process) and two exits, and each copies, then frees, one
    page-table entry per 4 KiB page of its ~150 MiB of memory (torch's, numpy's, Python's
    objects): ~6-12 ms per fork or exit. glibc's huge-page tunable (above) already gives most of
    its malloc heap 2 MiB pages; this covers the rest (Python's own arenas), so a fork copies
    and an exit frees one entry per 2 MiB instead. A task's process still gets its own copy of
    any 4 KiB it writes (copy on write splits the mapping in that process only). Best effort:
    a region the kernel will not collapse keeps its pages.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        madvise = libc.madvise
    except (OSError, AttributeError):
        return 0
    madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    madvise.restype = ctypes.c_int
    collapsed = 0
    try:
        with open(f"/proc/{os.getpid()}/maps") as maps:
            lines = maps.read().splitlines()
    except OSError:
        return 0
    for line in lines:
        fields = line.split()
        # anonymous (no path, or the brk heap), private, writable: what a fork copies entries of
        if fields[1][:2] != "rw" or fields[1][3] != "p" or fields[5:] not in ([], ["[heap]"]):
            continue
        start, end = (int(bound, 16) for bound in fields[0].split("-"))
        start, end = -(-start // HUGE_PAGE) * HUGE_PAGE, end // HUGE_PAGE * HUGE_PAGE
        if end > start and madvise(start, end - start, MADV_COLLAPSE) == 0:
            collapsed += end - start
    return collapsed
