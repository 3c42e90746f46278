"""The worker's one shared, read-only copy of an image's folders for the per-task root (issue 38).

Why: `task_root.prepare` copied, once per run and inside the run's container, 11,904 files
(290 MB) onto the run's tmpfs: 4-5 s of the run's CPU and wall clock and up to a quarter of its
memory, all charged to the participant, for the platform's own isolation. The copy is the same
for every run of one image with one platform code, so the worker (root on its host) makes it
once per (image, code) in a short trusted container of that image, running this module's `make`
(the same `task_root.prepare`, as the sandbox user, with the same folders left out) into a host
tmpfs, then makes that tmpfs read-only (its superblock: no mount of it anywhere is writable)
and owned by root, and binds it read-only into every meta-test container at `TARGET`
(`worker/task_root_cache.py`).

The run's supervisor (`load`) uses it only where its marker says it was made for exactly the
folders this run would copy (`task_root.trees`) and every mount point this run needs is in it;
otherwise it copies as before and the isolation line says why.

What it keeps: every folder a task can look a name up in is still a tmpfs (no negative dentry
is kept: `simple_lookup`), its positive dentries are the same files for every task of every run,
no task can write, chmod or remount it (read-only superblock, read-only bind, locked in the
task's user namespace; files owned by root), and its pages are never reclaimed (tmpfs, no swap
on the worker) so their residency says nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from submission_api.runner import task_root

TARGET = Path("/run/arena-root")
"""Where the worker binds the shared copy into the meta-test container (read-only)."""
MARKER = "arena-root.json"
VERSION = 1


def wanted_points(places: list[Path]) -> list[Path]:
    """Every empty folder `task_root.prepare` makes for mounts (`enter` mkdirs them)."""
    return [*(Path(p).resolve() for p in places),
            *(Path(p) for p in (*task_root.PSEUDO, "/sys", "/.old", "/.empty"))]


def make(into: Path, places: list[Path]) -> dict[str, object]:
    """In the trusted maker container: `task_root.prepare` onto `into` (no share of a run's
    memory to keep to: the host tmpfs's own size bounds it), then the marker."""
    root = task_root.prepare(into, places, places, share=1)
    os.chmod(root.folder, 0o755)  # mkdtemp's 0700: the worker makes it root's
    marker = {"version": VERSION, "folder": root.folder.name,
              "trees": [str(p) for p in task_root.trees(places)],
              "points": [str(p) for p in wanted_points(places)],
              "big": [str(p) for p in root.big]}
    (into / MARKER).write_text(json.dumps(marker))
    return marker


def load(places: list[Path], target: Path = TARGET) -> tuple[task_root.Root | None, str]:
    """The shared copy as this run's root, or None and why not ('' where there is none)."""
    try:
        marker = json.loads((target / MARKER).read_text())
    except FileNotFoundError:
        return None, ""
    except (OSError, ValueError) as error:
        return None, f"its marker unreadable: {error}"
    if not isinstance(marker, dict) or marker.get("version") != VERSION:
        return None, "made by another version"
    folder = target / str(marker.get("folder"))
    if marker.get("trees") != [str(p) for p in task_root.trees(places)]:
        return None, "made for other folders than this run's"
    if marker.get("points") != [str(p) for p in wanted_points(places)]:
        return None, "made for other mount points than this run's"
    missing = [p for p in wanted_points(places) if not (folder / p.relative_to("/")).is_dir()]
    if missing:
        return None, f"no mount point for {missing[0]}"
    big = tuple(Path(p) for p in marker.get("big", []))
    if not all(p.is_file() for p in big):
        return None, "a big file it binds is not in this image"
    if os.access(folder, os.W_OK) or not os.statvfs(target).f_flag & os.ST_RDONLY:
        return None, "it is writable here"
    return task_root.Root(folder, big, False, tuple(task_root.image_lowers(big)),
                          shared=True), ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--into", type=Path, required=True)
    parser.add_argument("--place", type=Path, action="append", default=[])
    args = parser.parse_args(argv)
    from submission_api.runner.namespaces import FIXED_PLACES

    # the order `task_root.for_run` lists them in: scratch, visible, then the fixed places
    sys.stdout.write(json.dumps(make(args.into, [*args.place, *FIXED_PLACES])) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
