"""compose.yaml validates with a real Compose, keeps database credentials away from workers, asks
for a GPU per worker, and refuses to start without its secrets."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import yaml
from arena_test_services import require_service

ROOT = Path(__file__).resolve().parents[3]


def compose(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    binary = shutil.which("docker-compose")
    if binary is None:
        require_service("docker-compose", "install Debian's docker-compose (scripts/services.sh)")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("POSTGRES_", "ARENA_"))}
    return subprocess.run([binary, "-f", str(ROOT / "compose.yaml"), *args], cwd=ROOT,
                          env={**clean, **env}, capture_output=True, text=True, timeout=60)


def test_compose_config_validates_and_wires_the_services():
    done = compose("config", env={"POSTGRES_PASSWORD": "pw", "ARENA_SECRET_KEY": "k" * 32,
                                  "ARENA_TEST_SEED_SECRET": "t" * 32})
    assert done.returncode == 0, done.stderr
    services = yaml.safe_load(done.stdout)["services"]

    assert {"postgres", "redis", "server", "worker", "sandbox"} <= set(services)
    worker_env = services["worker"]["environment"]
    assert not [k for k in worker_env if "DATABASE" in k or "POSTGRES" in k]
    assert all("pw" not in str(v) for v in worker_env.values())
    (device,) = services["worker"]["deploy"]["resources"]["reservations"]["devices"]
    assert device["capabilities"] == ["gpu"]
    assert "healthcheck" in services["server"] and "healthcheck" in services["postgres"]


def test_compose_refuses_to_run_without_its_secrets():
    done = compose("config", env={})
    assert done.returncode != 0
    assert "POSTGRES_PASSWORD" in done.stderr
