"""README's "One server, several workers" runs as printed (issue 32.6): its two bash blocks are
executed by bash, with only the addresses changed to this host's (the server's 10.0.0.4:8000, the
Redis at 10.0.0.5, /srv/arena) and the GPU line swapped for the CPU alternative it names; a
submission then goes through the worker and the Docker sandbox to a score. At a55d28d the block
set no ARENA_TEST_SEED_SECRET: `arena serve` refused to start (or, started otherwise, every
claim answered 500), and the login line named 127.0.0.1:8000."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from platform_support import REDIS_URL, TLS, Platform, free_port, make_model_zip, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def _blocks() -> tuple[str, str]:
    start = README.index("### One server, several workers")
    section = README[start:README.index("\n#", start + 10)]
    server, worker = re.findall(r"```bash\n(.*?)```", section, re.S)[:2]
    return server, worker


def _here(block: str, port: int, data: Path) -> str:
    """The block with this host's addresses; everything else as printed."""
    broker = re.search(r"redis://10\.0\.0\.5:6379/\d+", block)
    text = block.replace("http://10.0.0.4:8000", f"http://127.0.0.1:{port}")
    text = text.replace("/srv/arena", str(data)).replace("--host 0.0.0.0 --port 8000",
                                                         f"--host 127.0.0.1 --port {port}")
    if broker:
        text = text.replace(broker.group(0), REDIS_URL)
    return re.sub(r"^export ARENA_WORKER_GPU_IDS=.*$", "export ARENA_WORKER_CONCURRENCY=1",
                  text, flags=re.M)


def _start(script: str, log: Path, env: dict[str, str]) -> subprocess.Popen:
    bin_dir = str(Path(sys.executable).parent)  # `arena` as installed beside this python
    return subprocess.Popen(["bash", "-c", f"set -eu\n{script}"], stdout=log.open("ab"),
                            stderr=subprocess.STDOUT, start_new_session=True,
                            env={**env, "PATH": f"{bin_dir}:{env['PATH']}"})


def test_the_readme_deployment_blocks_run_as_printed(tmp_path, tiny_collection, arena_cache):
    port = free_port()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    server_block, worker_block = _blocks()
    lines = _here(server_block, port, tmp_path / "srv").strip().splitlines()
    # Run as printed, saving the admin token the block drew before its last line starts serving.
    script = "\n".join([*lines[:-1], f'echo "$ARENA_ADMIN_BOOTSTRAP_TOKEN" > {tmp_path}/admin',
                        f"exec {lines[-1]}"])
    server = _start(script, tmp_path / "server.log", clean)
    worker = None
    try:
        base = f"http://127.0.0.1:{port}"

        def answers() -> bool:
            try:
                return httpx.get(f"{base}/api/v1/phases", timeout=2, verify=TLS).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(lambda: answers() or server.poll() is not None, 90, "arena serve")
        assert server.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
        # Not the printed worker's dentry reset: each one drops the whole host's unused inodes,
        # so every other test process's worker reads its 1 GB image again on its next run (the
        # reset is checked in test_sandbox_dentry_reset.py; test platforms run without it).
        worker_env = {**clean, "ARENA_WORKER_DATA_DIR": str(tmp_path / "worker"),
                      "ARENA_WORKER_HEARTBEAT_INTERVAL_S": "3",
                      "ARENA_WORKER_RESET_DENTRIES": "0"}
        worker = _start(_here(worker_block, port, tmp_path / "srv"), tmp_path / "worker.log",
                        worker_env)
        platform = Platform(root=tmp_path, database_url="", base_url=base,
                            admin_token=(tmp_path / "admin").read_text().strip())
        organizer = platform.create_user("readme-organizer", "organizer")
        data = platform.register_collection(tiny_collection, arena_cache)
        phase_id = platform.create_phase(organizer, data, queue=None,
                                         protocol={"name": "cross-domain",
                                                   "tasks_per_dataset": 2})
        alice = platform.create_user("readme-alice")
        sid = platform.submit(alice, phase_id, make_model_zip(tmp_path / "model"))
        final = platform.wait_terminal(alice, sid, timeout_s=400)
        assert final["state"] == "finished", (final, (tmp_path / "worker.log").read_text()[-3000:])
        with platform.api(alice) as api:
            comp_id = api.get(f"/api/v1/phases/{phase_id}").json()["competition_id"]
        page = httpx.get(f"{base}/competitions/{comp_id}", timeout=30).text
        assert f"arena login --server {base} --token" in page  # ARENA_PUBLIC_URL, as exported
    finally:
        for process in (worker, server):
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
