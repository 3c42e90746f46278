"""`arena demo`: the embedded default deployment in one launch — the server on SQLite, a
filesystem broker, one worker process, a sample competition on generated data and two baseline
submissions — using exactly the production code paths (HTTP API, Celery job, sandbox).

The worker sandboxes with Docker when an engine answers and the sandbox image exists; otherwise it
runs submissions unsandboxed, which the demo says loudly: that mode is for trusted code only.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from server.core.config import Settings
from server.demo_launch import LaunchError, check_port_free, decide_fresh, stop_worker, wipe_state

if TYPE_CHECKING:
    import uvicorn

SANDBOX_IMAGE = "metadl-arena/sandbox:cpu"
BASELINES = {"alice": "protonet", "bob": "random"}
TERMINAL = {"finished", "failed", "timed_out", "cancelled"}


@dataclass(frozen=True)
class DemoOptions:
    data_dir: Path
    port: int = 8000
    executor: str = "auto"
    tasks_per_dataset: int = 10
    exit_when_done: bool = False
    wait_timeout_s: float = 1800
    fresh: bool | None = None  # --fresh / --keep; None: ask on a terminal, else fresh
    ask: Callable[[str], bool] | None = None  # a yes/no question on a terminal


def say(message: str) -> None:
    sys.stderr.write(f"[arena demo] {message}\n")
    sys.stderr.flush()


def choose_executor(requested: str) -> str:
    """docker when an engine answers and the sandbox image is built, else local (loudly)."""
    if requested != "auto":
        return requested
    try:
        import docker

        client = docker.from_env()
        client.images.get(SANDBOX_IMAGE)
        return "docker"
    except Exception as error:  # noqa: BLE001 - any failure means no usable sandbox here
        say(f"no Docker sandbox ({type(error).__name__}: {error}); build one with "
            "scripts/ensure_docker.sh && scripts/build_sandbox_image.sh cpu")
        return "local"


def start_server(settings: Settings, port: int) -> tuple[threading.Thread, uvicorn.Server]:
    import uvicorn

    from server.app import create_app

    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, name="arena-server", daemon=True)
    thread.start()
    for _ in range(300):
        if server.started:
            return thread, server
        time.sleep(0.1)
    raise RuntimeError(f"the server did not start on port {port}; is the port taken?")


def start_worker(options: DemoOptions, executor: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "ARENA_WORKER_BROKER_URL": "filesystem://",
           "ARENA_WORKER_DATA_DIR": str(options.data_dir),
           "ARENA_WORKER_SERVER_URL": f"http://127.0.0.1:{options.port}",
           "ARENA_WORKER_EXECUTOR": executor, "ARENA_WORKER_NAME": "demo-worker",
           "ARENA_WORKER_HEARTBEAT_INTERVAL_S": "5"}
    log = (options.data_dir / "worker.log").open("ab")
    # Its own session: a Ctrl-C reaches the demo alone, which then stops the worker in order.
    return subprocess.Popen([sys.executable, "-m", "worker"], env=env, stdout=log, stderr=log,
                            start_new_session=True)


def prepare_data(data_dir: Path) -> dict[str, list[tuple[str, Path]]]:
    """Generate (once) and compile the sample collection; role -> [(name, compiled entry)]."""
    from starting_kit.sample_data import generate_collection
    from submission_api.data import load_collection

    collection_dir = data_dir / "sample_data"
    if not (collection_dir / "info" / "meta_splits.txt").exists():
        say(f"generating the sample collection in {collection_dir}")
        generate_collection(collection_dir)
    collection = load_collection(collection_dir, data_dir / "compile-cache")
    return {role: [(n, collection.datasets[n].root) for n in collection.splits.get(split, [])]
            for role, split in (("meta_train", "meta-train"), ("meta_valid", "meta-valid"),
                                ("meta_test", "meta-test"))}


def seed_competition(api: httpx.Client, roles: dict[str, Any],
                     tasks_per_dataset: int) -> dict[str, Any]:
    """Users, datasets and an open phase through the public API; returns ids and tokens."""
    organizer = api.post("/api/v1/users", json={"username": "organizer", "role": "organizer"})
    tokens = {"organizer": organizer.raise_for_status().json()["token"]}
    for name in BASELINES:
        created = api.post("/api/v1/users", json={"username": name}).raise_for_status()
        tokens[name] = created.json()["token"]
    data: dict[str, Any] = {"collection": "sample_data"}
    for role, entries in roles.items():
        data[role] = []
        for name, root in entries:
            row = api.post("/api/v1/datasets/from-path", json={"path": str(root)})
            content_hash = row.raise_for_status().json()["content_hash"]
            data[role].append({"name": name, "content_hash": content_hash})
    phase = {"name": "feedback", "status": "open", "data": data, "seed": 0,
             "protocol": {"name": "cross-domain", "tasks_per_dataset": tasks_per_dataset},
             "runs_per_submission": 1, "time_limit_s": 1800,
             "resources": {"cpus": 2, "memory_mb": 4096, "gpus": 0}, "quota_per_day": 20}
    body = {"slug": "demo", "title": "MetaDL Arena demo (cross-domain, generated data)",
            "phases": [phase], **DEMO_PAGES}
    headers = {"Authorization": f"Bearer {tokens['organizer']}"}
    competition = api.post("/api/v1/competitions", json=body, headers=headers).raise_for_status()
    for name in BASELINES:  # the baselines' accounts accept the terms, as a newcomer would
        api.post(f"/api/v1/competitions/{competition.json()['id']}/participation",
                 json={"accept_terms": True},
                 headers={"Authorization": f"Bearer {tokens[name]}"}).raise_for_status()
    return {"tokens": tokens, "phase_id": competition.json()["phases"][0]["id"]}


DEMO_PAGES = {
    "description": "Meta-learn on some image domains, be meta-tested on tasks from others: "
                   "the NeurIPS'22 Cross-Domain MetaDL set-up, on generated data.",
    "terms": "This is a demo. By joining you agree that:\n\n- your submissions run on this "
             "machine and their scores are shown on the leaderboard;\n- you do not try to "
             "read the test data (the sandbox would stop you anyway).",
    "tabs": {
        "overview": "## How it works\n\nWrite a `model.py` with `MyMetaLearner` and "
                    "`MyLearner` (the NeurIPS'22 API), try it locally with `arena run`, then "
                    "submit it here. Each submission is meta-trained on the meta-train "
                    "domains and meta-tested on any-way any-shot tasks from the others.",
        "data": "## Data\n\nA synthetic Meta-Album collection made by `arena data generate`: "
                "small 128x128 images in several domains, the same format as Meta-Album. "
                "The test domains stay on the server.",
        "evaluation": "## Evaluation\n\nPer task: balanced accuracy normalized so that "
                      "chance is 0 and perfect is 1. Per submission: the mean over test "
                      "tasks, with a 95% confidence interval. Ties go to the earlier "
                      "submission.",
    },
    "teams": {"allowed": True, "max_size": 4},
}


def submit_baselines(api: httpx.Client, phase_id: int, tokens: dict[str, str],
                     work: Path) -> dict[str, int]:
    from submission_api.submission_zip import build_submission_zip

    kit = Path(__file__).resolve().parents[1] / "starting_kit" / "baselines"
    ids = {}
    for user, baseline in BASELINES.items():
        archive = build_submission_zip(kit / baseline, work / f"{baseline}.zip")
        with archive.open("rb") as handle:
            answer = api.post(f"/api/v1/phases/{phase_id}/submissions",
                              files={"file": (archive.name, handle, "application/zip")},
                              headers={"Authorization": f"Bearer {tokens[user]}"})
        ids[user] = answer.raise_for_status().json()["id"]
        say(f"{user} submitted {baseline}: submission {ids[user]}")
    return ids


def wait_for(api: httpx.Client, ids: dict[str, int], tokens: dict[str, str],
             timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        states = {user: api.get(f"/api/v1/submissions/{sid}",
                                headers={"Authorization": f"Bearer {tokens[user]}"}).json()
                  for user, sid in ids.items()}
        if all(s.get("state") in TERMINAL for s in states.values()):
            for user, s in states.items():
                say(f"{user}: {s.get('state')} score={s.get('score')} {s.get('message') or ''}")
            return all(s.get("state") == "finished" for s in states.values())
        time.sleep(2)
    say("timed out waiting for the demo submissions")
    return False


def _serve_until_stopped(worker: subprocess.Popen[bytes], options: DemoOptions) -> int:
    """Wait for Ctrl-C (KeyboardInterrupt, handled by the caller) or the worker's own end."""
    while worker.poll() is None:
        time.sleep(1)
    say(f"the worker ended by itself (exit {worker.returncode}); see "
        f"{options.data_dir}/worker.log")
    return 1


def run_demo(options: DemoOptions) -> int:
    """Run the demo; returns the process exit code."""
    options.data_dir.mkdir(parents=True, exist_ok=True)
    try:
        check_port_free(options.port)  # before minutes of data generation, not after
    except LaunchError as exc:
        say(f"error: {exc}")
        return 2
    fresh = decide_fresh(options.data_dir, options.fresh, options.ask)
    if fresh:
        if (options.data_dir / "arena.db").exists():
            say(f"starting fresh: the earlier demo's database in {options.data_dir} is wiped "
                "(pass --keep to keep it)")
        wipe_state(options.data_dir)
    else:
        say(f"keeping the earlier demo's database in {options.data_dir}")
    executor = choose_executor(options.executor)
    if executor == "local":
        say("WARNING: no sandbox — submissions run UNSANDBOXED on this machine. "
            "This mode is for trusted code only.")
    admin_token = secrets.token_urlsafe(24)
    # Fresh secrets each launch (the demo starts from an empty database every time).
    settings = Settings(data_dir=options.data_dir, broker_url="filesystem://",
                        secret_key=secrets.token_hex(32), test_seed_secret=secrets.token_hex(32),
                        admin_bootstrap_token=admin_token, reconcile_interval_s=30,
                        requeue_after_s=120, public_base_url=f"http://127.0.0.1:{options.port}")
    roles = prepare_data(options.data_dir) if fresh else {}
    _, server = start_server(settings, options.port)
    worker = start_worker(options, executor)
    base = f"http://127.0.0.1:{options.port}"
    try:
        with httpx.Client(base_url=base, timeout=120,
                          headers={"Authorization": f"Bearer {admin_token}"}) as api:
            if not fresh:
                say(f"web: {base}/  (executor: {executor}); log in with the tokens printed when "
                    "this demo was created; press Ctrl-C to stop")
                return _serve_until_stopped(worker, options)
            seeded = seed_competition(api, roles, options.tasks_per_dataset)
            ids = submit_baselines(api, seeded["phase_id"], seeded["tokens"], options.data_dir)
            say(f"web: {base}/phases/{seeded['phase_id']}/leaderboard  (executor: {executor})")
            for user, token in seeded["tokens"].items():
                say(f"token of {user}: {token}  (log in at {base}/login)")
            if options.exit_when_done:
                return 0 if wait_for(api, ids, seeded["tokens"], options.wait_timeout_s) else 1
            say("running; press Ctrl-C to stop")
            return _serve_until_stopped(worker, options)
    except KeyboardInterrupt:
        stop_worker(worker, say, options.data_dir / "worker.log")
        return 0
    finally:
        if worker.poll() is None:
            worker.terminate()
        try:
            worker.wait(timeout=20)
        except subprocess.TimeoutExpired:
            worker.kill()
        server.should_exit = True
