"""A secret phase's run has its worker host alone (issue 34): a real Celery worker with two slots,
a run of a secret phase and a run of another account's public phase submitted together, both in
the Docker sandbox. Each prints the host clock when its meta-train begins and at every
prediction, and sleeps 3 s in meta_fit: without the host lock both slots take their run at
once and the spans overlap by seconds (the sleep and the meta-test after it); with it, one
starts only after the other ended. The secret run's isolation line says "exclusive host" to its
organizers; the worker's start-up probe reached the workers API through its calls."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from platform_support import Platform, make_model_zip

pytestmark = [pytest.mark.integration, pytest.mark.docker, pytest.mark.slow]

HOOKS = {"top": "import time",
         "meta_fit": 'print("SPAN-START", repr(time.time()), flush=True)\ntime.sleep(3)',
         "predict": 'print("SPAN-END", repr(time.time()), flush=True)'}


@pytest.fixture(scope="module")
def two_runs(platform: Platform, tiny_collection: Path, arena_cache: Path,
             tmp_path_factory: pytest.TempPathFactory) -> dict:
    organizer = platform.create_user("excl-org", "organizer")
    data = platform.register_collection(tiny_collection, arena_cache)
    protocol = {"name": "cross-domain", "tasks_per_dataset": 2}
    phases = {"secret": platform.create_phase(organizer, data, protocol=protocol,
                                              leaderboard={"test_data": "secret"}),
              "public": platform.create_phase(organizer, data, protocol=protocol,
                                              leaderboard={"test_data": "public"})}
    folder = tmp_path_factory.mktemp("exclusive")
    owners = {"secret": platform.create_user("excl-alice"),
              "public": platform.create_user("excl-bob")}
    ids = {kind: platform.submit(owners[kind], phases[kind],
                                 make_model_zip(folder / kind, **HOOKS)) for kind in phases}
    # Both jobs wait already. No pre-fault of the 1 GB image: each pool process read it on its
    # first run, inside the host lock, so twice on this test's path (7-9 s each at load 35);
    # what is checked is who holds the host, not which pages are resident.
    platform.start_worker("w-excl", ARENA_WORKER_CONCURRENCY="2", ARENA_WORKER_PREFAULT="0")
    finals = {kind: platform.wait_terminal(owners[kind], sid, timeout_s=600)
              for kind, sid in ids.items()}
    return {"organizer": organizer, "ids": ids, "finals": finals}


def span(platform: Platform, token: str, submission_id: int) -> tuple[float, float]:
    """(first SPAN-START, last SPAN-END) in the run's full log, read as its organizer."""
    with platform.api(token) as api:
        logs = api.get(f"/api/v1/submissions/{submission_id}/logs").raise_for_status().json()
    text = "\n".join(run.get("log") or "" for run in logs["runs"])
    starts = [float(x) for x in re.findall(r"SPAN-START (\d+\.\d+)", text)]
    ends = [float(x) for x in re.findall(r"SPAN-END (\d+\.\d+)", text)]
    assert starts and ends, text[-2000:]
    return min(starts), max(ends)


def organizer_page(platform: Platform, token: str, path: str) -> str:
    with httpx.Client(base_url=platform.base_url, timeout=30, follow_redirects=False) as web:
        page = web.get("/login")
        nonce = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
        assert web.post("/login", data={"csrf_token": nonce, "token": token}).status_code == 303
        return " ".join(web.get(path).text.split())


def test_the_secret_run_and_the_ordinary_run_never_overlap(platform, two_runs):
    assert {k: f["state"] for k, f in two_runs["finals"].items()} == {
        "secret": "finished", "public": "finished"}, two_runs["finals"]
    secret = span(platform, two_runs["organizer"], two_runs["ids"]["secret"])
    public = span(platform, two_runs["organizer"], two_runs["ids"]["public"])
    overlap = min(secret[1], public[1]) - max(secret[0], public[0])
    print(f"spans: secret {secret[1] - secret[0]:.1f} s, public {public[1] - public[0]:.1f} s, "
          f"gap between them {-overlap:.1f} s")
    assert overlap < 0, f"the runs overlapped by {overlap:.1f} s: secret {secret}, public {public}"


def test_the_isolation_lines_say_who_had_the_host(platform, two_runs):
    org = two_runs["organizer"]
    secret = organizer_page(platform, org, f"/submissions/{two_runs['ids']['secret']}")
    public = organizer_page(platform, org, f"/submissions/{two_runs['ids']['public']}")
    print("isolation lines:", *re.findall(r"isolation of its test tasks: ([^<]*)<",
                                          secret + public), sep="\n  ")
    assert "exclusive host: no other run on this host" in secret
    assert "shared host: up to 1 other run(s)" in public and "exclusive host" not in public


def test_the_workers_start_up_probe_reached_the_workers_api(platform, two_runs):
    with platform.api() as api:  # the operator
        rows = [w for w in api.get("/api/v1/admin/workers").raise_for_status().json()
                if w["name"].startswith("w-excl/")]
    found = {w["task_isolation"] for w in rows}
    assert rows and "own" in found and "shared" not in found, rows
