"""What operators see of real workers (issue 32.6), on the e2e platform (uvicorn, Postgres,
Celery workers on Redis, the Docker sandbox):
- an idle worker, which reports nothing to the server, is on the dashboard (it said "No worker
  has reported yet");
- a successful run logs `run.finished` at INFO on the worker (INFO was lost in the pool child),
  and Celery's job lines, which print the run token, stay out;
- a second Ctrl-C releases the run at once (it waited for its lease to expire: billiard's own
  SIGTERM handler replaced ours and exited with SystemExit), and SIGTERM to the worker's process
  group releases too, with no traceback;
- two workers started with one name claim under lease owners of their own, and the dashboard
  shows a stopped worker without the run it held."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from platform_support import Platform, make_model_zip, sweep_worker_folders, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.docker, pytest.mark.slow]

CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
STOPPED = "the worker evaluating this run was stopped by its operator"


HELD = "time.sleep(600)"
"""What a run that a test stops, releases or kills does in meta-fit: it is still running when
its test gets to it, however late (its phase's limit is 900 s; the tests cancel it)."""


@pytest.fixture(scope="module")
def fleet(platform: Platform, tiny_collection: Path, arena_cache: Path,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """Every test's worker(s), started at once, each test's on a queue and a phase of its own
    (a worker only ever takes its own test's runs), with the test's runs queued before: the
    start-ups and first runs overlap instead of following each other test by test. The idle
    worker is the INFO test's: once the dashboard has shown it idle, its run is queued."""
    organizer = platform.create_user("ops-organizer", "organizer")
    alice = platform.create_user("ops-alice")
    data = platform.register_collection(tiny_collection, arena_cache)
    folder = tmp_path_factory.mktemp("ops")
    runs = {"ops-info": ["pass"], "ops-ctrlc": [HELD], "ops-term": [HELD],
            "ops-twin": [HELD, HELD]}
    fleet: dict = {"alice": alice, "sids": {}, "workers": {}}
    for name, meta_fits in runs.items():
        queue = f"{platform.queue}-{name}"
        phase = platform.create_phase(organizer, data, queue=queue, time_limit_s=900,
                                      protocol={"name": "cross-domain",
                                                "tasks_per_dataset": 1})
        # No pre-fault of the 1 GB image before each run: what is checked is what operators
        # see, not page-cache isolation.
        env = {"ARENA_WORKER_QUEUES": f'["{queue}"]', "ARENA_WORKER_MAX_TIME_LIMIT_S": "900",
               "ARENA_WORKER_PREFAULT": "0"}
        if name == "ops-info":
            fleet["workers"]["ops-idle"] = [platform.start_worker("ops-idle", **env)]
            # Seen before any other worker starts and before its own run is queued: the
            # dashboard pings the broker for idle workers only while no worker reports
            # (`web/organizer.py`), and workers report as soon as they claim a run (looked for
            # after the others started, it failed in 4 of 5 runs).
            wait_until(lambda: "worker.ready" in _log(platform, "ops-idle"), 120, "the worker")
            fleet["idle_page"] = wait_until(
                lambda: (p := _dashboard(platform)) and "ops-idle" in p and p, 60,
                "the idle worker on the dashboard")
        fleet["sids"][name] = [
            platform.submit(alice, phase, make_model_zip(folder / f"{name}{i}", meta_fit=code))
            for i, code in enumerate(meta_fits)]
        if name == "ops-info":
            fleet["workers"][name] = fleet["workers"]["ops-idle"]
            continue
        fleet["workers"][name] = [platform.start_worker(name, **env)]
        if name == "ops-twin":
            fleet["workers"][name].append(platform.start_worker(
                name, **env, ARENA_WORKER_DATA_DIR=str(folder / "twin2")))
    # The twins' test waits ~2 leases (30 s) after its kill for the dashboard to call the stopped
    # twin offline: it kills from here, in the background, so that wait passes beside the other
    # tests' instead of after them.
    fleet["twin"] = None
    twin = threading.Thread(target=_stop_a_holding_twin, args=(platform, fleet), daemon=True)
    twin.start()
    yield fleet
    twin.join(timeout=300)
    _remove_orphans(platform)
    # what the SIGKILLed workers left (Platform.stop sweeps only the folders under its root)
    sweep_worker_folders([platform.root / f"worker-{name}" / "runs" for name in fleet["workers"]]
                         + [folder / "twin2" / "runs"], platform.base_url)


def _stop_a_holding_twin(platform: Platform, fleet: dict) -> None:
    """Once both twins hold a run, SIGKILL the first while it holds its run; sets
    `fleet["twin"]` to what the workers list said then (`holders`) and which owner was stopped,
    or to the error."""
    first, _second = fleet["workers"]["ops-twin"]
    done: dict = {}
    try:
        done["holders"] = holders = wait_until(
            lambda: len(h := {w["name"]: w["current_run_id"] for w in _workers(platform)
                              if w["name"].startswith("ops-twin/") and w["current_run_id"]})
            == 2 and h, 240, "both twins to hold a run", every_s=1)
        if len(set(holders.values())) == 2:  # else the test fails on it: nothing to stop
            [done["stopped"]] = [n for n in holders if f":{first.pid}:" in n]
            platform.kill_worker(first)  # stopped while it holds its run
    except BaseException as error:  # noqa: BLE001 - re-raised by the test
        done["error"] = error
    fleet["twin"] = done


def _remove_orphans(platform: Platform) -> None:
    """The sandboxes a SIGKILLed worker left sleeping in meta-fit (nobody times them)."""
    import docker
    from worker.pipeline.execute import compute_deployment_id

    prefix = f"arena-{compute_deployment_id(platform.base_url)}-run-"
    for container in docker.from_env().containers.list(all=True, filters={"name": prefix}):
        if container.name.startswith(prefix):
            container.remove(force=True)


def _dashboard(platform: Platform) -> str:
    """The organizer dashboard as the admin sees it (logged in through the form)."""
    with httpx.Client(base_url=platform.base_url, timeout=60) as web:
        form = web.get("/login")
        web.post("/login", data={"token": platform.admin_token,
                                 "csrf_token": CSRF.search(form.text).group(1)})
        return web.get("/organizer").text


def _workers(platform: Platform) -> list[dict]:
    with platform.api() as api:
        return api.get("/api/v1/admin/workers").raise_for_status().json()


def _log(platform: Platform, name: str) -> str:
    return (platform.root / f"worker-{name}.log").read_text(errors="replace")


def _stop(platform: Platform, worker) -> None:  # noqa: ANN001 - subprocess.Popen
    if worker.poll() is None:
        platform.kill_worker(worker)


def test_an_idle_worker_is_on_the_dashboard(fleet):
    """The fleet saw the idle worker on the dashboard before any other worker started (it
    takes the INFO test's run afterwards: that test stops it)."""
    page = fleet["idle_page"]
    assert 'id="idle-workers"' in page and "No worker has reported yet" not in page


def test_a_finished_run_logs_at_info_and_never_its_token(platform, fleet):
    [worker], [sid] = fleet["workers"]["ops-info"], fleet["sids"]["ops-info"]
    try:
        assert platform.wait_terminal(fleet["alice"], sid)["state"] == "finished"
        log = wait_until(lambda: (t := _log(platform, "ops-idle")) and "run.finished" in t and t,
                         30, "the run.finished line")
        assert re.search(r" INFO worker\.pipeline\.evaluate run\.finished .*score=", log), log
        assert " INFO worker.pipeline.evaluate run.claimed" in log
        assert "evaluate_run[" not in log or "received data=" not in log  # no args: the token
    finally:
        _stop(platform, worker)


def _running(platform: Platform, fleet: dict, name: str):  # noqa: ANN202
    [worker], [sid] = fleet["workers"][name], fleet["sids"][name]
    wait_until(lambda: platform.submission(fleet["alice"], sid)["runs"][0]["state"] == "running",
               240, "the run to start", every_s=1)
    time.sleep(3)  # into meta-training
    return worker, sid


def _released_by_the_worker(platform: Platform, fleet: dict, sid: int) -> dict:
    """The run once queued again; its message says the worker released it (a lapsed lease,
    which the reconciler finds after 15 s, says 'lease of ... expired')."""
    run = wait_until(lambda: (r := platform.submission(fleet["alice"], sid)["runs"][0])
                     ["state"] == "queued" and r, 60, "the run to be queued again")
    assert STOPPED in run["message"] and "expired" not in run["message"], run
    return run


def _cancel(platform: Platform, fleet: dict, sid: int) -> None:
    with platform.api(fleet["alice"]) as api:
        api.post(f"/api/v1/submissions/{sid}/cancel")


def test_a_second_ctrl_c_gives_the_run_back_at_once(platform, fleet):
    worker, sid = _running(platform, fleet, "ops-ctrlc")
    try:
        os.killpg(worker.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends
        time.sleep(2)
        os.killpg(worker.pid, signal.SIGINT)
        worker.wait(timeout=60)
        _released_by_the_worker(platform, fleet, sid)
        log = _log(platform, "ops-ctrlc")
        assert "run.released" in log and "Traceback" not in log, log[-3000:]
        rows = {w["name"].split("@")[0]: w for w in _workers(platform)}
        assert rows["ops-ctrlc/0"]["current_run_id"] is None  # nothing held once released
    finally:
        _stop(platform, worker)
        _cancel(platform, fleet, sid)


def test_sigterm_gives_the_run_back_and_a_clean_stop(platform, fleet):
    worker, sid = _running(platform, fleet, "ops-term")
    try:
        os.killpg(worker.pid, signal.SIGTERM)  # docker stop, systemd: the whole group
        worker.wait(timeout=60)
        _released_by_the_worker(platform, fleet, sid)
        log = _log(platform, "ops-term")
        assert "Traceback" not in log and "worker.stopping" in log, log[-3000:]
    finally:
        _stop(platform, worker)
        _cancel(platform, fleet, sid)


def test_two_workers_with_one_name_hold_runs_as_two_owners(platform, fleet):
    first, second = fleet["workers"]["ops-twin"]
    sids = fleet["sids"]["ops-twin"]
    try:
        wait_until(lambda: fleet["twin"], 300, "the twins' runs (killed in the background)")
        if "error" in fleet["twin"]:
            raise fleet["twin"]["error"]
        holders = fleet["twin"]["holders"]
        assert len(set(holders.values())) == 2, holders  # two owners, two runs
        stopped = fleet["twin"]["stopped"]
        wait_until(lambda: {w["name"]: w for w in _workers(platform)}[stopped]
                   ["current_run_id"] is None, 90, "the stopped twin to hold no run", every_s=2)
        page = wait_until(lambda: (p := _dashboard(platform)) and re.search(
            rf"<code>{re.escape(stopped)}</code>.*?offline", p, re.S) and p, 90,
            "the stopped twin shown offline", every_s=2)
        assert page
    finally:
        _stop(platform, first)
        _stop(platform, second)
        for sid in sids:
            _cancel(platform, fleet, sid)
