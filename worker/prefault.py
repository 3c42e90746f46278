"""Before each run, the worker brings every page of the sandbox image and of the run's data into
the page cache (issue 34; `submission_api/runner/prefault.py` says why).

The image's files are read by a short-lived container of the image (the sandbox's user, no
network, read-only, no capabilities, the platform's code mounted as in a run): the files are
overlay2's lower layers, which the worker may not be able to read on the host, and a container
sees exactly the files a run sees. The run's bundle (its data: hard links into the compiled
cache, or files the worker wrote) is read here, by the worker. Neither charge lands in the run's
cgroup, so its own memory pressure cannot evict them.
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


def prefault_run(client: Any, image: str, bundle_dir: Path | None,
                 code_dir: Path | None = None) -> dict[str, Any]:
    """The image and the run's data, read in full; what was read (for the run's log)."""
    done: dict[str, Any] = {"image": prefault_image(client, image, code_dir)}
    if bundle_dir is not None:
        done["data"] = read_tree([bundle_dir])
    log.info("run.prefault", extra={"image": image, **{f"{k}_{m}": v for k, d in done.items()
                                                        for m, v in d.items()}})
    return done
