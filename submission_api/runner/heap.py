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

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # <malloc.h>
MMAP_THRESHOLD = 1 << 30
"""Blocks up to 1 GiB come from the heap and are reused after free (glibc's own cap is 32 MiB)."""
TRIM_THRESHOLD = (1 << 31) - 1
"""Freed memory at the heap's top stays mapped: the process ends with its task anyway."""
HUGE_PAGES = "glibc.malloc.hugetlb=1"
"""glibc asks for transparent huge pages on what it maps (`madvise(MADV_HUGEPAGE)`); read at
exec, so it goes into the environment of the process that the fork server is forked from."""


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
