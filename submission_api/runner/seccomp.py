"""A small seccomp filter for test-task processes: no control over the shared page cache.

Every task reads the same files (the submission, the learner, the image's libraries) through
one page cache. A task that could evict chosen pages and a next task that could read which
pages are resident would share a channel of many bits per boundary (issue 19 measured 512 B
with a 16 MB file). This filter, installed by the task's process before any participant code
runs (and inherited by everything it starts), takes away the precise tools of both sides:

- eviction: `fadvise64` becomes a no-op that succeeds (libraries that advise SEQUENTIAL or
  DONTNEED keep working), `madvise(MADV_COLD | MADV_PAGEOUT)` and `process_madvise` fail with
  EPERM (MADV_DONTNEED stays allowed: allocators free anonymous memory with it; on a file it
  only unmaps, it does not evict);
- residency reads: `mincore`, `cachestat` and `preadv2` with RWF_NOWAIT fail (EPERM, ENOSYS,
  EOPNOTSUPP), and so does `io_uring_setup` (its rings carry fadvise, madvise and NOWAIT reads).
What remains is named in docs/internals.md: reading a page brings it in (a one-way bit per page
never read before), and timing a read tells a cached page from one on disk.

System calls of another ABI (x32, or i386 through int 0x80) fail with ENOSYS: Python never
makes them, and each has its own numbers this filter would otherwise miss.
"""

from __future__ import annotations

import ctypes
import errno
import platform

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
LD_W_ABS, JEQ_K, JSET_K, RET_K = 0x20, 0x15, 0x45, 0x06
MADV_COLD, MADV_PAGEOUT, RWF_NOWAIT = 20, 21, 0x8
X32_BIT = 0x40000000
# offsets in struct seccomp_data: nr, arch, instruction pointer, args[6] (8 bytes each)
NR, ARCH = 0, 4


def _arg(index: int) -> int:
    return 16 + 8 * index  # the low 32 bits on a little-endian machine


ARCHES = {
    "x86_64": (0xC000003E, {"fadvise64": 221, "madvise": 28, "mincore": 27, "preadv2": 327,
                            "process_madvise": 440, "cachestat": 451, "io_uring_setup": 425}),
    "aarch64": (0xC00000B7, {"fadvise64": 223, "madvise": 233, "mincore": 232, "preadv2": 286,
                             "process_madvise": 440, "cachestat": 451,
                             "io_uring_setup": 425}),
}


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Filter))]


def build_program(arch: int, numbers: dict[str, int]) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions; a jump skips jt/jf instructions."""
    deny = RET_ERRNO | errno.EPERM
    nosys = RET_ERRNO | errno.ENOSYS
    return [
        (LD_W_ABS, 0, 0, ARCH),                       # 0
        (JEQ_K, 1, 0, arch),                          # 1
        (RET_K, 0, 0, nosys),                         # 2: a foreign ABI
        (LD_W_ABS, 0, 0, NR),                         # 3
        (JSET_K, 0, 1, X32_BIT),                      # 4
        (RET_K, 0, 0, nosys),                         # 5: x32 numbers
        (JEQ_K, 0, 1, numbers["fadvise64"]),          # 6
        (RET_K, 0, 0, RET_ERRNO | 0),                 # 7: the advice is ignored, "succeeds"
        (JEQ_K, 0, 1, numbers["mincore"]),            # 8
        (RET_K, 0, 0, deny),                          # 9
        (JEQ_K, 0, 1, numbers["process_madvise"]),    # 10
        (RET_K, 0, 0, deny),                          # 11
        (JEQ_K, 0, 1, numbers["cachestat"]),          # 12
        (RET_K, 0, 0, nosys),                         # 13
        (JEQ_K, 0, 1, numbers["io_uring_setup"]),     # 14: its FADVISE/MADVISE/NOWAIT ops
        (RET_K, 0, 0, nosys),                         # 15
        (JEQ_K, 0, 3, numbers["preadv2"]),            # 16 -> 20 when not
        (LD_W_ABS, 0, 0, _arg(5)),                    # 17: flags (fd, vec, vlen, pos_l, pos_h)
        (JSET_K, 0, 6, RWF_NOWAIT),                   # 18 -> 25 (allow) without RWF_NOWAIT
        (RET_K, 0, 0, RET_ERRNO | errno.EOPNOTSUPP),  # 19
        (JEQ_K, 0, 4, numbers["madvise"]),            # 20 -> 25 when not
        (LD_W_ABS, 0, 0, _arg(2)),                    # 21: advice
        (JEQ_K, 1, 0, MADV_COLD),                     # 22 -> 24
        (JEQ_K, 0, 1, MADV_PAGEOUT),                  # 23 -> 25 when not
        (RET_K, 0, 0, deny),                          # 24
        (RET_K, 0, 0, RET_ALLOW),                     # 25
    ]


def deny_page_cache_control() -> bool:
    """Install the filter on this process (and what it starts); False where this machine's
    architecture is not known here or the kernel refuses (nothing changed then)."""
    known = ARCHES.get(platform.machine())
    if known is None:
        return False
    program = build_program(*known)
    array = (_Filter * len(program))(*[_Filter(*i) for i in program])
    prog = _Program(len(program), array)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False
    return libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) == 0
