"""A test task cannot steer the shared page cache (issue 19): under the task's seccomp filter
`posix_fadvise(DONTNEED)` evicts nothing, and the residency readers (mincore, RWF_NOWAIT,
process_madvise, io_uring) are refused, while ordinary reads and allocators keep working."""

from __future__ import annotations

import ctypes
import os
import platform
from pathlib import Path

import pytest

from submission_api.runner import seccomp

pytestmark = pytest.mark.skipif(platform.machine() not in seccomp.ARCHES,
                                reason="the filter knows this architecture's numbers only")
SIZE = 1 << 20
LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.mmap.restype = ctypes.c_void_p


def resident_pages(fd: int) -> int:
    address = LIBC.mmap(None, SIZE, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
    pages = (ctypes.c_ubyte * (SIZE // 4096))()
    assert LIBC.mincore(ctypes.c_void_p(address), SIZE, pages) == 0
    LIBC.munmap(ctypes.c_void_p(address), SIZE)
    return sum(page & 1 for page in pages)


def in_filtered_child(work) -> str:  # noqa: ANN001 - a callable run in the child
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            assert seccomp.deny_page_cache_control()
            os.write(write, str(work()).encode())
        except BaseException as error:  # noqa: BLE001 - report it to the parent
            os.write(write, f"raised {error!r}".encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as handle:
        text = handle.read()
    os.waitpid(pid, 0)
    return text


@pytest.fixture
def cached_file(tmp_path: Path):
    path = tmp_path / "shipped.bin"
    path.write_bytes(os.urandom(SIZE))
    fd = os.open(path, os.O_RDONLY)
    os.read(fd, SIZE)
    os.sync()
    yield fd
    os.close(fd)


def test_fadvise_dontneed_evicts_nothing_under_the_filter(cached_file: int):
    if resident_pages(cached_file) < SIZE // 4096:
        pytest.skip("the file is not fully cached here")
    assert in_filtered_child(lambda: os.posix_fadvise(cached_file, 0, 0,
                                                      os.POSIX_FADV_DONTNEED)) == "None"
    assert resident_pages(cached_file) == SIZE // 4096
    # The control: without the filter the same call evicts (on a disk-backed file).
    os.posix_fadvise(cached_file, 0, 0, os.POSIX_FADV_DONTNEED)
    if resident_pages(cached_file) == SIZE // 4096:
        pytest.skip("this filesystem ignores DONTNEED (tmpfs): the eviction cannot be shown")


def test_residency_readers_are_refused_and_plain_reads_work(cached_file: int):
    def work() -> str:
        address = LIBC.mmap(None, SIZE, 1, 1, cached_file, 0)
        pages = (ctypes.c_ubyte * (SIZE // 4096))()
        results = [LIBC.mincore(ctypes.c_void_p(address), SIZE, pages),
                   LIBC.madvise(ctypes.c_void_p(address), SIZE, seccomp.MADV_PAGEOUT),
                   LIBC.madvise(ctypes.c_void_p(address), SIZE, seccomp.MADV_COLD),
                   LIBC.syscall(425, 4, ctypes.byref((ctypes.c_char * 120)()))]
        try:
            os.preadv(cached_file, [bytearray(8)], 0, os.RWF_NOWAIT)
            results.append("nowait read")
        except OSError:
            results.append(-1)
        results.append(os.preadv(cached_file, [bytearray(8)], 0))
        results.append(LIBC.madvise(ctypes.c_void_p(address), SIZE, 4))  # DONTNEED: allowed
        return ",".join(map(str, results))

    assert in_filtered_child(work) == "-1,-1,-1,-1,-1,8,0"


def test_namespaces_and_mounts_are_refused_under_the_filter_while_fork_and_threads_work():
    """The sandbox lets the supervisor's own code unshare and mount (worker/sandbox_seccomp.py);
    a task loses both again: whatever it asks, with the flags our setup itself uses too."""
    from submission_api.runner import namespaces

    numbers = seccomp.ARCHES[platform.machine()][1]

    def work() -> str:
        import subprocess
        import threading

        def errno_of(result: int) -> int:
            return ctypes.get_errno() if result != 0 else 0

        refused = {
            "unshare task flags": errno_of(LIBC.unshare(namespaces.TASK_NAMESPACES)),
            "unshare user": errno_of(LIBC.unshare(namespaces.CLONE_NEWUSER)),
            "setns": errno_of(LIBC.setns(os.open("/proc/self/ns/ipc", os.O_RDONLY), 0)),
            "mount": errno_of(LIBC.mount(b"tmpfs", b"/tmp", b"tmpfs", 6, None)),
            "umount2": errno_of(LIBC.umount2(b"/tmp", 0)),
            "umount2 detach": errno_of(LIBC.umount2(b"/tmp", 2)),  # the sandbox allows it
            "pivot_root": errno_of(LIBC.syscall(numbers["pivot_root"], b"/", b"/")),
            "mount_setattr": errno_of(LIBC.syscall(numbers["mount_setattr"], -100, b"/", 0,
                                                   None, 0)),
            "fsopen": errno_of(LIBC.syscall(numbers["fsopen"], b"tmpfs", 0)),
            # clone(CLONE_NEWUSER | SIGCHLD): refused before any child exists
            "clone newuser": errno_of(LIBC.syscall(numbers["clone"], 0x10000000 | 17, 0, 0, 0,
                                                   0)),
            "clone3": errno_of(LIBC.syscall(numbers["clone3"], None, 0)),
        }
        child = os.fork()
        if child == 0:
            os._exit(7)
        forked = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
        ran = subprocess.run(["true"], check=False).returncode
        seen = []
        thread = threading.Thread(target=lambda: seen.append("thread"))
        thread.start()
        thread.join()
        return repr((refused, forked, ran, seen))

    refused, forked, ran, seen = eval(in_filtered_child(work))  # noqa: S307 - our own repr
    import errno

    assert refused == {name: errno.EPERM for name in refused} | {"clone3": errno.ENOSYS}
    assert (forked, ran, seen) == (7, 0, ["thread"])


def test_every_residency_oracle_is_refused_or_void_while_allocators_keep_working(cached_file: int):
    """Issue 34: the oracles of the cooc page-cache cheat. Each answer is an errno or a no-op
    success (never a kill), and what honest code does (malloc's DONTNEED on anonymous memory,
    huge-page advice, plain reads and writes) still works."""
    import errno

    numbers = seccomp.ARCHES[platform.machine()][1]

    def work() -> str:
        def outcome(result: int) -> str:
            return "ok" if result == 0 else errno.errorcode[ctypes.get_errno()]

        address = LIBC.mmap(None, SIZE, 1, 1, cached_file, 0)
        anonymous = LIBC.mmap(None, SIZE, 3, 0x22, -1, 0)  # PRIVATE | ANONYMOUS
        ctypes.memset(anonymous, 1, SIZE)
        seen = {
            "madvise willneed": outcome(LIBC.madvise(ctypes.c_void_p(address), SIZE, 3)),
            "madvise collapse": outcome(LIBC.madvise(ctypes.c_void_p(address), SIZE, 25)),
            "madvise pageout": outcome(LIBC.madvise(ctypes.c_void_p(address), SIZE, 21)),
            "readahead": outcome(LIBC.syscall(numbers["readahead"], cached_file, 0, SIZE)),
            "dumpable 1": outcome(LIBC.prctl(4, 1, 0, 0, 0)),
            "dumpable 0": outcome(LIBC.prctl(4, 0, 0, 0, 0)),
            "anonymous dontneed": outcome(LIBC.madvise(ctypes.c_void_p(anonymous), SIZE, 4)),
            "anonymous free": outcome(LIBC.madvise(ctypes.c_void_p(anonymous), SIZE, 8)),
            "hugepage": outcome(LIBC.madvise(ctypes.c_void_p(anonymous), SIZE, 14)),
        }
        out = os.open(os.devnull, os.O_WRONLY)
        try:
            os.pwritev(out, [b"x"], 0, os.RWF_NOWAIT)
            seen["pwritev2 nowait"] = "ok"
        except OSError as error:
            seen["pwritev2 nowait"] = errno.errorcode[error.errno]
        seen["pwritev2"] = str(os.pwritev(out, [b"x"], 0))
        try:
            open("/proc/self/pagemap", "rb").close()
            seen["pagemap"] = "opened"
        except OSError as error:
            seen["pagemap"] = errno.errorcode[error.errno]
        seen["status"] = "ok" if b"VmRSS" in Path("/proc/self/status").read_bytes() else "?"
        return repr(seen)

    def not_dumpable() -> str:
        LIBC.prctl(4, 0, 0, 0, 0)  # as the supervisor's forks are (isolation.protect_supervisor)
        return work()

    seen = eval(in_filtered_child(not_dumpable))  # noqa: S307 - our own repr
    assert seen == {"madvise willneed": "ok", "madvise collapse": "EPERM",
                    "madvise pageout": "EPERM", "readahead": "ok", "dumpable 1": "EPERM",
                    "dumpable 0": "ok", "anonymous dontneed": "ok", "anonymous free": "ok",
                    "hugepage": seen["hugepage"],
                    "pwritev2 nowait": errno.errorcode[errno.EOPNOTSUPP],
                    "pwritev2": "1", "pagemap": "EACCES" if os.getuid() else seen["pagemap"],
                    "status": "ok"}
    assert seen["hugepage"] in ("ok", "EINVAL")  # EINVAL: a kernel without THP


def test_where_pivot_root_is_refused_the_run_keeps_the_container_root(tmp_path: Path) -> None:
    """The fallback: the task filter refuses `pivot_root` (as the sandbox's profile of before,
    or an AppArmor profile, does); nothing is copied and the line says why."""
    from submission_api.runner import task_root

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        seccomp.deny_page_cache_control()
        root, why = task_root.for_run(tmp_path, [Path("/tmp")], [])
        os.write(write, f"{root}|{why}".encode())
        os._exit(0)
    os.close(write)
    answer = os.read(read, 4096).decode()
    os.waitpid(pid, 0)

    assert answer == "None|pivot_root refused here (seccomp, AppArmor or the kernel)"
    assert list(tmp_path.iterdir()) == []
    assert task_root.describe(None, "why") == "the container's root (no per-task root: why)"
