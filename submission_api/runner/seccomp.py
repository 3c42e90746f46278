"""A small seccomp filter for every sandboxed process of a run (meta-train and each test
task): no residency oracles on the shared page cache, and no namespaces or mounts of its own.

The rule (issue 34, DESIGN.md): no page whose residency a task or a run can observe may change
state because of another task or run. The pages themselves are kept constant by the trusted
side (the submission and the learner are read from a per-run tmpfs copy, `runner/private_copy`;
the image's files and the phase's data are pre-faulted by the worker, `worker/prefault.py`).
This filter, installed before any participant code runs (and inherited by everything it
starts), takes away the precise tools for steering or reading residency, as defence in depth:

- eviction: `fadvise64` and `readahead` become no-ops that succeed (libraries that advise
  SEQUENTIAL, DONTNEED or WILLNEED keep working), `madvise` WILLNEED is a no-op too, and
  `madvise` COLD, PAGEOUT and COLLAPSE and `process_madvise` fail with EPERM. MADV_DONTNEED and
  MADV_FREE stay allowed (glibc malloc, numpy and torch free anonymous memory with them; a
  filter cannot tell a file mapping from an anonymous one, and on a file they only drop this
  process's page-table entries: they evict nothing);
- residency reads: `mincore` (EPERM), `cachestat` (ENOSYS), `preadv2`/`pwritev2` with
  RWF_NOWAIT (EOPNOTSUPP: what a kernel without it says, so I/O libraries fall back) and
  `io_uring_setup` (ENOSYS: its rings carry fadvise, madvise and NOWAIT reads) are refused;
- `/proc/self/pagemap` (its bit 63 shows which pages of a file mapping are present, and the
  kernel's fault-around maps every cached page near a touched one): a process that is not
  dumpable cannot open it, and `prctl(PR_SET_DUMPABLE, non-zero)` fails with EPERM here.
What remains is named in docs/internals.md (a program started with `execve` is dumpable again,
/proc/self/smaps counts mapped pages, `getrusage` counts major faults, and timing a read tells
a cached page from one on disk): all of them read a residency that the trusted side keeps
constant.

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
MADV_WILLNEED, MADV_COLD, MADV_PAGEOUT, MADV_COLLAPSE, RWF_NOWAIT = 3, 20, 21, 25, 0x8
PR_SET_DUMPABLE = 4
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
                            "preadv2": 327, "pwritev2": 328, "readahead": 187, "prctl": 157,
                            "clone": 56, "unshare": 272, "setns": 308,
                            "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161}),
    "aarch64": (0xC00000B7, {**_GENERIC, "fadvise64": 223, "madvise": 233, "mincore": 232,
                             "preadv2": 286, "pwritev2": 287, "readahead": 213, "prctl": 167,
                             "clone": 220, "unshare": 97, "setns": 268,
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


def _argument_rules(number: int, index: int,
                    tests: list[tuple[Instruction, int]]) -> list[Instruction]:
    """For system call `number`: load argument `index`, then for each (test, answer) return
    `answer` when the test (a JEQ_K or JSET_K on the argument) holds; allow otherwise. Another
    system call skips the whole block."""
    block: list[Instruction] = [(LD_W_ABS, 0, 0, _arg(index))]
    for (code, _, _, k), answer in tests:
        block += [(code, 0, 1, k), (RET_K, 0, 0, answer)]
    block.append((RET_K, 0, 0, RET_ALLOW))
    return [(JEQ_K, 0, len(block), number), *block]


def _dumpable_rule(number: int) -> list[Instruction]:
    """prctl(PR_SET_DUMPABLE, v) with v != 0: EPERM (a dumpable process may open its own
    /proc/self/pagemap); every other prctl, and making oneself not dumpable, allowed."""
    return [(JEQ_K, 0, 6, number),
            (LD_W_ABS, 0, 0, _arg(0)),
            (JEQ_K, 0, 3, PR_SET_DUMPABLE),
            (LD_W_ABS, 0, 0, _arg(1)),
            (JEQ_K, 1, 0, 0),
            (RET_K, 0, 0, RET_ERRNO | errno.EPERM),
            (RET_K, 0, 0, RET_ALLOW)]


def build_program(arch: int, numbers: dict[str, int]) -> list[Instruction]:
    """The filter as (code, jt, jf, k) instructions; a jump skips jt/jf instructions."""
    program: list[Instruction] = [
        (LD_W_ABS, 0, 0, ARCH),
        (JEQ_K, 1, 0, arch),
        (RET_K, 0, 0, RET_ERRNO | errno.ENOSYS),      # a foreign ABI
        (LD_W_ABS, 0, 0, NR),
        (JSET_K, 0, 1, X32_BIT),
        (RET_K, 0, 0, RET_ERRNO | errno.ENOSYS),      # x32 numbers
    ]
    for name in ("fadvise64", "readahead"):           # the advice is ignored, "succeeds"
        program += [(JEQ_K, 0, 1, numbers[name]), (RET_K, 0, 0, RET_ERRNO | 0)]
    for name, code in REFUSED.items():
        program += [(JEQ_K, 0, 1, numbers[name]), (RET_K, 0, 0, RET_ERRNO | code)]
    # preadv2(fd, vec, vlen, pos_l, pos_h, flags); madvise(addr, len, advice); clone(flags, ...)
    nowait = [((JSET_K, 0, 0, RWF_NOWAIT), RET_ERRNO | errno.EOPNOTSUPP)]
    program += _argument_rules(numbers["preadv2"], 5, nowait)
    program += _argument_rules(numbers["pwritev2"], 5, nowait)
    program += _argument_rules(numbers["madvise"], 2, [
        ((JEQ_K, 0, 0, MADV_WILLNEED), RET_ERRNO | 0),
        *(((JEQ_K, 0, 0, advice), RET_ERRNO | errno.EPERM)
          for advice in (MADV_COLD, MADV_PAGEOUT, MADV_COLLAPSE))])
    program += _argument_rules(numbers["clone"], 0, [((JSET_K, 0, 0, NAMESPACE_FLAGS),
                                                      RET_ERRNO | errno.EPERM)])
    program += _dumpable_rule(numbers["prctl"])
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
