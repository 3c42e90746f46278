"""Before each run, the worker brings every page of the sandbox image, of the run's data and of
the platform's code the sandboxes mount into the page cache (issue 34;
`submission_api/runner/prefault.py` says why).

The image's files are read by a short-lived container of the image (the sandbox's user, no
network, read-only, no capabilities, the platform's code mounted as in a run): the files are
overlay2's lower layers, which the worker may not be able to read on the host, and a container
sees exactly the files a run sees. The run's bundle (its data: hard links into the compiled
cache, or files the worker wrote) is read here, by the worker. Neither charge lands in the run's
cgroup, so its own memory pressure cannot evict them. The image (a GB or more) is read again
only when the host's reclaim counters moved since its last pre-fault: without reclaim, no page
of it can have left the page cache.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from submission_api.runner.prefault import read_tree
from worker.sandbox_config import (
    CODE_TARGET,
    CONTAINER_LABELS,
    SANDBOX_GID,
    SANDBOX_UID,
    default_code_dir,
)

log = logging.getLogger(__name__)
PREFAULT_COMMAND = ("python3", "-m", "submission_api.runner.prefault", "/")


def prefault_image(client: Any, image: str, code_dir: Path | None = None) -> dict[str, float]:
    """Read every file of `image` in a container of it; returns its files, bytes, seconds.

    Raises:
        docker.errors.DockerException: the engine failed (the caller's platform fault).
    """
    from docker.types import Mount

    code = str(code_dir or default_code_dir())
    output = client.containers.run(
        image, list(PREFAULT_COMMAND), user=f"{SANDBOX_UID}:{SANDBOX_GID}",
        network_mode="none", read_only=True, cap_drop=["ALL"],
        security_opt=["no-new-privileges:true"], environment={"PYTHONPATH": CODE_TARGET},
        mounts=[Mount(f"{CODE_TARGET}/submission_api", code, type="bind", read_only=True)],
        labels={**CONTAINER_LABELS, "org.metadl-arena.purpose": "prefault"},
        remove=True, stdout=True, stderr=False)
    summary: dict[str, float] = json.loads(output.decode().strip().splitlines()[-1])
    return summary


RECLAIM_PREFIXES = ("pgsteal_", "pgscan_", "drop_pagecache", "pginodesteal", "kswapd_inodesteal")
"""/proc/vmstat counters that move whenever the kernel drops page-cache pages anywhere on the
host (reclaim by kswapd or in a cgroup at its limit, `drop_caches`; the inode shrinker, e.g.
the dentry reset's `drop_caches` 2, frees the page of a one-page file with its inode)."""
_prefaulted: dict[str, tuple[tuple[str, int], ...]] = {}
"""Per image: the host's reclaim counters read just before its last pre-fault."""


def reclaim_counters(vmstat: Path = Path("/proc/vmstat")) -> tuple[tuple[str, int], ...]:
    """The host's reclaim counters (empty where /proc/vmstat cannot be read)."""
    try:
        lines = vmstat.read_text().splitlines()
    except OSError:
        return ()
    return tuple((name, int(value)) for name, value in (line.split() for line in lines)
                 if name.startswith(RECLAIM_PREFIXES))


def image_still_resident(image: str) -> bool:
    """Whether every page the last pre-fault of `image` brought in must still be resident: no
    page has been reclaimed anywhere on the host since just before it (a run cannot evict
    them otherwise: they are not charged to its cgroup, and its eviction calls are refused).
    Conservative: any reclaim, of any cgroup, means a new pre-fault."""
    counters = reclaim_counters()
    return bool(counters) and _prefaulted.get(image) == counters


def prefault_run(client: Any, image: str, bundle_dir: Path | None,
                 code_dir: Path | None = None) -> dict[str, Any]:
    """The image and the run's data, read in full; what was read (for the run's log). The
    image is read again only when the host may have reclaimed some of its pages since."""
    done: dict[str, Any] = {}
    if image_still_resident(image):
        done["image"] = {"skipped": 1.0}
    else:
        before = reclaim_counters()
        done["image"] = prefault_image(client, image, code_dir)
        _prefaulted[image] = before
    if bundle_dir is not None:
        done["data"] = read_tree([bundle_dir])
    # The platform's code, mounted into every sandbox from this host (not the image's: the
    # image's pre-fault skips it): a run touching pages of a module no one imports would leave
    # bits for the next. About 1 MB, read every run.
    done["code"] = read_tree([code_dir or default_code_dir()])
    log.info("run.prefault", extra={"image": image, **{f"{k}_{m}": v for k, d in done.items()
                                                        for m, v in d.items()}})
    return done
