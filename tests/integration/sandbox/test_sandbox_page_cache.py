"""Between runs, through the page cache of the image (issue 34.2): overlay2 shares the image's page
cache between containers, so a run that touches chosen pages of an image file no one maps leaves
bits that a later run of another account reads back (here without any refused oracle: it counts
major faults, under the task filter). The worker's pre-fault (`worker/prefault.py`) reads every
page of the image before each run: then the residency the later run reads is constant, and its
own memory pressure cannot evict what the pre-fault brought in (the pages are charged to the
pre-fault's container, which has ended, not to the run's)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from worker.prefault import prefault_image
from worker.sandbox_config import CODE_TARGET, SANDBOX_GID, SANDBOX_UID, default_code_dir

pytestmark = [pytest.mark.integration, pytest.mark.docker]
IMAGE = os.environ.get("ARENA_SANDBOX_IMAGE", "metadl-arena/sandbox:cpu")
BITS = 48
PATTERN = [(0x5A3C9E1B7F24 >> j) & 1 for j in range(BITS)]

COMMON_PATH = 'os.path.join(os.path.dirname(os.__file__), "pydoc_data", "topics.py")'
DATA_PATH = '"/bundle/images.u8"'
COMMON = f"""
import json, mmap, os, resource, sys
path = {COMMON_PATH}
fd = os.open(path, os.O_RDONLY)
"""
EVICT = COMMON + "os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)\n"
WRITE = COMMON + """
from submission_api.runner import seccomp
assert seccomp.deny_page_cache_control()
view = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
view.madvise(mmap.MADV_RANDOM)  # a touch brings in its page only (a read() would read ahead)
for j, bit in enumerate(json.loads(sys.argv[1])):
    view[(2 * j + bit) * 4096]
"""
READ = COMMON + """
from submission_api.runner import seccomp
assert seccomp.deny_page_cache_control()
view = mmap.mmap(fd, 2 * BITS * 4096, access=mmap.ACCESS_READ)
view.madvise(mmap.MADV_RANDOM)
def resident(page):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_majflt
    view[page * 4096]
    return resource.getrusage(resource.RUSAGE_SELF).ru_majflt == before
print(json.dumps([[resident(2 * j), resident(2 * j + 1)] for j in range(BITS)]))
""".replace("BITS", str(BITS))
PRESSURE = COMMON + """
os.pread(fd, 2 * BITS * 4096, 0)  # the whole region read here: charged here if not cached
chunks = []
while True:  # anonymous memory up to the limit, without swap: the kernel reclaims every page
    chunks.append(bytearray(4 << 20))  # it can in this cgroup before it kills the process
""".replace("BITS", str(BITS))


@pytest.fixture(autouse=True)
def _forget_prefaults():
    """These tests evict image pages with DONTNEED, which moves no reclaim counter: later runs
    in this process must pre-fault the image again (`worker.prefault.image_still_resident`)."""
    yield
    from worker import prefault

    prefault._prefaulted.clear()


def in_container(docker_client, script: str, *args: str, memory_mb: int = 512,
                 data: Path | None = None) -> str:
    """`script` in a container of the image as the sandbox runs it (its user, no network,
    read-only, no capabilities); its stdout ("" when it was killed for memory)."""
    from docker.types import Mount

    import docker

    code = str(default_code_dir())
    try:
        return _run(docker_client, code, Mount, script, args, memory_mb, data)
    except docker.errors.ContainerError:  # the pressure container, killed at its limit
        return ""


def _run(docker_client, code, Mount, script, args, memory_mb, data) -> str:  # noqa: ANN001, N803

    output = docker_client.containers.run(
        IMAGE, ["python3", "-c", script, *args], user=f"{SANDBOX_UID}:{SANDBOX_GID}",
        network_mode="none", read_only=True, cap_drop=["ALL"], remove=True,
        environment={"PYTHONPATH": CODE_TARGET}, mem_limit=f"{memory_mb}m",
        memswap_limit=f"{memory_mb}m",
        mounts=[Mount(f"{CODE_TARGET}/submission_api", code, type="bind", read_only=True),
                *([Mount("/bundle", str(data), type="bind", read_only=True)] if data else [])])
    return output.decode()


def decoded(docker_client, data: Path | None = None) -> list[int] | None:
    """The bits the reader finds (None: no pair has exactly one resident page)."""
    script = READ if data is None else READ.replace(COMMON_PATH, DATA_PATH)
    pairs = json.loads(in_container(docker_client, script, data=data).strip().splitlines()[-1])
    if not all(a != b for a, b in pairs):
        return None
    return [int(b) for _, b in pairs]


def test_a_later_run_reads_what_an_earlier_run_touched_unless_the_worker_prefaults(
        docker_client, tmp_path: Path):
    # Without the pre-fault (the control): run 1 touches one page of each pair, run 2 reads
    # the pattern back, through the image's shared page cache.
    for _ in range(3):  # another run's pre-fault of this image in between reads all resident
        in_container(docker_client, EVICT)
        in_container(docker_client, WRITE, json.dumps(PATTERN))
        if (found := decoded(docker_client)) == PATTERN:
            break
    assert found == PATTERN
    # With it: the worker reads the whole image between the two runs; run 2 finds every page
    # resident, so nothing decodes.
    in_container(docker_client, EVICT)
    in_container(docker_client, WRITE, json.dumps(PATTERN))
    summary = prefault_image(docker_client, IMAGE)
    assert summary["files"] > 1000 and summary["bytes"] > 100 << 20, summary
    assert decoded(docker_client) is None


def test_a_runs_own_memory_pressure_cannot_evict_what_the_prefault_brought_in(docker_client):
    # The control: pages a container brought in are charged to it, and its own pressure
    # evicts them (a run could clear bits it set).
    in_container(docker_client, EVICT)
    in_container(docker_client, PRESSURE, memory_mb=96)
    pairs = json.loads(in_container(docker_client, READ).strip().splitlines()[-1])
    evicted_own = sum(not a for a, _ in pairs) + sum(not b for _, b in pairs)
    # Pre-faulted: charged to the pre-fault's ended container; the same pressure evicts none.
    # Read again (up to 3 times) when some are gone: another test process's dentry reset
    # (`drop_caches` 2 frees unused inodes with their pages) or the host's reclaim in between
    # evicts them (seen once with 3 xdist workers beside a fresh-machine run); a run's own
    # pressure evicting them would do so every time.
    for _ in range(3):
        in_container(docker_client, EVICT)
        prefault_image(docker_client, IMAGE)
        in_container(docker_client, PRESSURE, memory_mb=96)
        pairs = json.loads(in_container(docker_client, READ).strip().splitlines()[-1])
        if all(a and b for a, b in pairs):
            break
    assert all(a and b for a, b in pairs), pairs
    if evicted_own == 0:
        pytest.skip("this host's reclaim kept the container's own pages: the control could "
                    "not show an eviction (the pre-faulted case above still held)")


def test_a_later_run_cannot_read_what_an_earlier_run_touched_in_the_data(docker_client,
                                                                         tmp_path: Path):
    """The phase's data (here one compiled file, as the bundle's hard links share it): one
    container touches pages, the worker pre-faults the run's bundle, the next reads nothing."""
    from submission_api.runner.prefault import read_tree

    bundle = tmp_path / "bundle"
    bundle.mkdir()
    bundle.chmod(0o755)
    with (bundle / "images.u8").open("wb") as handle:
        handle.write(os.urandom(2 * BITS * 4096))
        handle.flush()
        os.fsync(handle.fileno())
        os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    (bundle / "images.u8").chmod(0o644)
    write = WRITE.replace(COMMON_PATH, DATA_PATH)

    def evict() -> None:
        fd = os.open(bundle / "images.u8", os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)

    for _ in range(3):  # the control, read again when another process's reclaim came between
        in_container(docker_client, write, json.dumps(PATTERN), data=bundle)
        if (found := decoded(docker_client, bundle)) == PATTERN:
            break
        evict()
    assert found == PATTERN  # without the pre-fault: carried
    evict()
    in_container(docker_client, write, json.dumps(PATTERN), data=bundle)
    assert read_tree([bundle])["files"] == 1  # the worker, before the next run
    assert decoded(docker_client, bundle) is None
