"""A small seccomp filter for test-task processes: no control over the shared page cache, and
no namespaces or mounts of their own.

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

Namespaces and mounts: the sandbox's seccomp profile lets the supervisor's own code create a
task's namespaces and mount its fresh tmpfs (worker/sandbox_seccomp.py); the task loses that
again here. `unshare`, `setns`, `mount`, `umount2`, `pivot_root`, `chroot`, `mount_setattr` and
the new mount API fail with EPERM, `clone` with any namespace flag too, and `clone3` (whose
flags sit in memory, out of a filter's reach) with ENOSYS, so that libc falls back to `clone`.
A task keeps the capabilities of its user namespace only until `isolation.drop_capabilities`.

System calls of another ABI (x32, or i386 through int 0x80) fail with ENOSYS: Python never
makes them, and each has its own numbers this filter would otherwise miss.
"""

from __future__ import annotations

import ctypes
import errno
import platform

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
LD_W_ABS, JEQ_K, JSET_K, JA, RET_K = 0x20, 0x15, 0x45, 0x05, 0x06
MADV_COLD, MADV_PAGEOUT, RWF_NOWAIT = 20, 21, 0x8
X32_BIT = 0x40000000
# offsets in struct seccomp_data: nr, arch, instruction pointer, args[6] (8 bytes each)
NR, ARCH = 0, 4


def _arg(index: int) -> int:
    return 16 + 8 * index  # the low 32 bits on a little-endian machine


_GENERIC = {"clone3": 435, "mount_setattr": 442, "open_tree": 428, "move_mount": 429,
            "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
            "process_madvise": 440, "cachestat": 451, "io_uring_setup": 425}
ARCHES = {
    "x86_64": (0xC000003E, {**_GENERIC, "fadvise64": 221, "madvise": 28, "mincore": 27,
                            "preadv2": 327, "clone": 56, "unshare": 272, "setns": 308,
                            "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161}),
    "aarch64": (0xC00000B7, {**_GENERIC, "fadvise64": 223, "madvise": 233, "mincore": 232,
                             "preadv2": 286, "clone": 220, "unshare": 97, "setns": 268,
                             "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51}),
}
NAMESPACE_FLAGS = 0x7E020000
"""CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET: `clone` with any: refused."""
REFUSED = {name: errno.EPERM for name in (
    "mincore", "process_madvise", "unshare", "setns", "mount", "umount2", "pivot_root",
    "chroot", "mount_setattr", "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount",
    "fspick")} | {"cachestat": errno.ENOSYS, "io_uring_setup": errno.ENOSYS,
                  "clone3": errno.ENOSYS}
"""Refused whatever the arguments. clone3: ENOSYS, so that libc falls back to `clone`, whose
flags the filter can read (clone3 passes them in memory)."""


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_Filter))]


Instruction = tuple[int, int, int, int]


def _argument_rule(number: int, index: int, tests: list[Instruction],
                   refused: int) -> list[Instruction]:
    """For system call `number`: load argument `index`, run `tests` (each jumps to the refusal
    when true, falls through when false), refuse with `refused` or allow. Another system call
    skips the whole block."""
    block = [(LD_W_ABS, 0, 0, _arg(index))]
    block += [(code, len(tests) - i, 0, k) for i, (code, _, _, k) in enumerate(tests)]
    block += [(JA, 0, 0, 1), (RET_K, 0, 0, refused), (RET_K, 0, 0, RET_ALLOW)]
    return [(JEQ_K, 0, len(block), number), *block]


def build_program(arch: int, numbers: dict[str, int]) -> list[Instruction]:
    """The filter as (code, jt, jf, k) instructions; a jump skips jt/jf instructions."""
    program: list[Instruction] = [
        (LD_W_ABS, 0, 0, ARCH),
        (JEQ_K, 1, 0, arch),
        (RET_K, 0, 0, RET_ERRNO | errno.ENOSYS),      # a foreign ABI
        (LD_W_ABS, 0, 0, NR),
        (JSET_K, 0, 1, X32_BIT),
        (RET_K, 0, 0, RET_ERRNO | errno.ENOSYS),      # x32 numbers
        (JEQ_K, 0, 1, numbers["fadvise64"]),
        (RET_K, 0, 0, RET_ERRNO | 0),                 # the advice is ignored, "succeeds"
    ]
    for name, code in REFUSED.items():
        program += [(JEQ_K, 0, 1, numbers[name]), (RET_K, 0, 0, RET_ERRNO | code)]
    # preadv2(fd, vec, vlen, pos_l, pos_h, flags); madvise(addr, len, advice); clone(flags, ...)
    program += _argument_rule(numbers["preadv2"], 5, [(JSET_K, 0, 0, RWF_NOWAIT)],
                              RET_ERRNO | errno.EOPNOTSUPP)
    program += _argument_rule(numbers["madvise"], 2, [(JEQ_K, 0, 0, MADV_COLD),
                                                      (JEQ_K, 0, 0, MADV_PAGEOUT)],
                              RET_ERRNO | errno.EPERM)
    program += _argument_rule(numbers["clone"], 0, [(JSET_K, 0, 0, NAMESPACE_FLAGS)],
                              RET_ERRNO | errno.EPERM)
    return [*program, (RET_K, 0, 0, RET_ALLOW)]


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
