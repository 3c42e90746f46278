"""Every way out of a run tears its loop-mounted output down, with the real Docker driver.

A run ended at the wall-clock backstop ("too loaded", released and retried) while a host process
sat inside its output folder: the plain `umount` was refused as busy, the driver raised, and the
run folder's removal then deleted the image under the live mount, leaving the mount and a loop
device backed by a deleted file under the worker's runs folder.
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import pytest

from worker.sandbox_output import pick_mechanism
from worker.sweep import detach_loop_devices_for, detach_loops_under, mounts_under, unmount_under

pytestmark = [pytest.mark.integration, pytest.mark.docker]


def hold_when_mounted(root: Path, held: list[subprocess.Popen], stop: threading.Event) -> None:
    """Start a host process inside the run's output mount as soon as it appears."""
    while not stop.is_set():
        for point in mounts_under(root):
            if Path(point).name == "mnt" and Path(point).parent.name.startswith(".arena-output"):
                held.append(subprocess.Popen(["sleep", "120"], cwd=point))
                return
        time.sleep(0.02)


def test_a_host_starved_run_with_a_busy_output_leaves_no_mount_or_loop_device(run_script,
                                                                              tmp_path: Path):
    if pick_mechanism() != "loop":
        pytest.skip("the loop-mounted output needs root and loop devices (/dev/loop-control, "
                    "mkfs.ext4); this host has none")
    root = tmp_path.resolve()
    held: list[subprocess.Popen] = []
    stop = threading.Event()
    holder = threading.Thread(target=hold_when_mounted, args=(root, held, stop), daemon=True)
    holder.start()
    try:
        # Sleeps: under its 60 s charged clock, past its 2 s backstop (the host's fault).
        result = run_script("import time; open('/output/partial', 'w').write('x');"
                            " time.sleep(600)", wall_time_s=60.0, backstop_s=2.0)
        assert held, "the output folder was never mounted"
        assert result.host_starved and result.limit_hit == "backstop", result
        assert mounts_under(root) == []
        assert not list(root.glob(".arena-output-*"))
        held[0].kill()
        held[0].wait()
        deadline = time.monotonic() + 20
        while detach_loop_devices_for(root) and time.monotonic() < deadline:
            time.sleep(0.1)  # the lazily unmounted filesystem goes with its last user
        assert detach_loop_devices_for(root) == []
    finally:
        stop.set()
        for process in held:
            process.kill()
            process.wait()
        unmount_under(root)  # what the failure (before the fix) left: never leak it
        detach_loops_under(root)


def test_an_area_mounted_before_its_flag_was_set_is_still_unmounted(tmp_path: Path):
    """An exception between the mount and its flag (the worker's SIGTERM raises `WorkerStopped`
    at any bytecode) once left the mount behind and deleted its image under it."""
    if pick_mechanism() != "loop":
        pytest.skip("the loop-mounted output needs root and loop devices")
    from worker.sandbox_output import LoopArea

    root = tmp_path.resolve()
    area = LoopArea(root / "output", 4)
    try:
        area.create()
        area.mounted = False  # where the exception left it
        area.close()
        assert mounts_under(root) == []
        assert detach_loop_devices_for(root) == []
        assert not list(root.glob(".arena-output-*"))
    finally:
        unmount_under(root)
        detach_loops_under(root)


def test_an_unmount_interrupted_by_the_workers_stop_still_detaches(tmp_path: Path, monkeypatch):
    """SIGTERM raises `WorkerStopped` in the run, possibly inside the unmount's subprocess: the
    exception goes on (the run is released) and the mount is gone before the run folder is."""
    if pick_mechanism() != "loop":
        pytest.skip("the loop-mounted output needs root and loop devices")
    from worker import sandbox_output
    from worker.shutdown import WorkerStopped

    root = tmp_path.resolve()
    area = sandbox_output.LoopArea(root / "output", 4)
    real_try = sandbox_output._try
    stops: list[list[str]] = []

    def stopped_once(command: list[str]) -> str | None:
        if command[0] == "umount" and not stops:
            stops.append(command)
            raise WorkerStopped("SIGTERM during the unmount")
        return real_try(command)

    try:
        area.create()
        monkeypatch.setattr(sandbox_output, "_try", stopped_once)
        with pytest.raises(WorkerStopped):
            area.close()
        assert stops and mounts_under(root) == []
    finally:
        unmount_under(root)
        detach_loops_under(root)
