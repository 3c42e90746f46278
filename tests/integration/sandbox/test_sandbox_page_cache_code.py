"""Between runs, through the page cache of the platform's code (issue 34.2): every sandbox mounts
`submission_api` from the worker host read-only, and the image's pre-fault skips it (it is not
the image's). A run touching chosen pages of a file of it no one reads leaves bits a later run
reads back once host reclaim has evicted them; the worker's pre-fault before each run
(`worker.prefault.prefault_run`) now reads the code too, and the later run reads nothing."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from worker.prefault import prefault_run
from worker.sandbox_config import CODE_TARGET, SANDBOX_GID, SANDBOX_UID, default_code_dir

pytestmark = [pytest.mark.integration, pytest.mark.docker]
IMAGE = os.environ.get("ARENA_SANDBOX_IMAGE", "metadl-arena/sandbox:cpu")
BITS = 48
PATTERN = [(0x3C5A1B9E247F >> j) & 1 for j in range(BITS)]
TARGET = f"{CODE_TARGET}/submission_api/unread_table.py"
SCRIPT = """
import json, mmap, os, resource, sys
from submission_api.runner import seccomp
assert seccomp.deny_page_cache_control()
fd = os.open("TARGET", os.O_RDONLY)
view = mmap.mmap(fd, 2 * BITS * 4096, access=mmap.ACCESS_READ)
view.madvise(mmap.MADV_RANDOM)  # a touch brings in its page only
if sys.argv[1] != "read":
    for j, bit in enumerate(json.loads(sys.argv[1])):
        view[(2 * j + bit) * 4096]
else:
    def resident(page):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_majflt
        view[page * 4096]
        return resource.getrusage(resource.RUSAGE_SELF).ru_majflt == before
    print(json.dumps([[resident(2 * j), resident(2 * j + 1)] for j in range(BITS)]))
""".replace("TARGET", TARGET).replace("BITS", str(BITS))


def in_container(docker_client, code: Path, argument: str) -> str:  # noqa: ANN001
    from docker.types import Mount

    output = docker_client.containers.run(
        IMAGE, ["python3", "-c", SCRIPT, argument], user=f"{SANDBOX_UID}:{SANDBOX_GID}",
        network_mode="none", read_only=True, cap_drop=["ALL"], remove=True,
        environment={"PYTHONPATH": CODE_TARGET}, mem_limit="512m", memswap_limit="512m",
        mounts=[Mount(f"{CODE_TARGET}/submission_api", str(code), type="bind",
                      read_only=True)])
    return output.decode()


def decoded(docker_client, code: Path) -> list[int] | None:  # noqa: ANN001
    pairs = json.loads(in_container(docker_client, code, "read").strip().splitlines()[-1])
    return [int(b) for _, b in pairs] if all(a != b for a, b in pairs) else None


def evict(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)  # written back first: DONTNEED leaves dirty pages
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # host reclaim, in an instant
    os.close(fd)


def test_a_later_run_cannot_read_what_an_earlier_run_touched_in_the_platforms_code(
        docker_client, tmp_path: Path):  # noqa: ANN001
    code = tmp_path / "submission_api"
    shutil.copytree(default_code_dir(), code, ignore=shutil.ignore_patterns("__pycache__"))
    table = code / "unread_table.py"  # a module no run imports (a large table, say)
    table.write_text("TABLE = (\n" + "    0,\n" * (2 * BITS * 4096 // 7) + ")\n")
    for path in [tmp_path, *tmp_path.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    for _ in range(3):  # the control, read again when another process's reclaim came between
        evict(table)  # (stop 44's check beside a 6 GB image build once lost it so)
        in_container(docker_client, code, json.dumps(PATTERN))
        if (found := decoded(docker_client, code)) == PATTERN:
            break
    assert found == PATTERN  # the control: carried between runs

    evict(table)
    in_container(docker_client, code, json.dumps(PATTERN))
    done = prefault_run(docker_client, IMAGE, None, code)  # the worker, before the next run
    assert done["code"]["files"] > 10, done
    assert decoded(docker_client, code) is None
