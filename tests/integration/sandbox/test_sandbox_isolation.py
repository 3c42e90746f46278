"""What a sandboxed run can see: its own folders and allowlisted variables, nothing else.

A secret planted on the host (in a file that is not mounted, and in the worker's environment)
must be found nowhere in the container's filesystem or environment. The script receives the
secret reversed, so that its own source and argv do not contain it.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest

from worker.sandbox import SandboxLimits, SandboxPlatformError, SandboxSpec, run_sandbox
from worker.sandbox_output import pick_mechanism

pytestmark = [pytest.mark.integration, pytest.mark.docker]

SCAN = """
import json, os, sys
secret = sys.argv[1][::-1].encode()
hits, scanned, unreadable = [], 0, 0
for root, dirs, files in os.walk("/", followlinks=False):
    if root == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
    for name in files:
        path = os.path.join(root, name)
        if os.path.islink(path) or not os.path.isfile(path):
            continue
        try:
            with open(path, "rb") as handle:
                tail = b""
                while chunk := handle.read(1 << 20):
                    if secret in tail + chunk:
                        hits.append(path)
                        break
                    tail = chunk[-len(secret):]
            scanned += 1
        except OSError:
            unreadable += 1
env_hits = [key for key, value in os.environ.items() if secret.decode() in key + value]
print(json.dumps({"hits": hits, "env_hits": env_hits, "scanned": scanned,
                  "unreadable": unreadable, "env": sorted(os.environ)}))
"""


def test_a_secret_on_the_host_is_nowhere_in_the_sandbox(run_script, tmp_path, monkeypatch):
    secret = f"arena-secret-{secrets.token_hex(16)}"
    hidden = tmp_path / "not-mounted"
    hidden.mkdir()
    (hidden / "credentials.txt").write_text(secret)
    monkeypatch.setenv("ARENA_DB_PASSWORD", secret)
    monkeypatch.setenv("ARENA_PLANTED", secret)
    result = run_script(SCAN, secret[::-1], wall_time_s=300.0, memory_mb=512)
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["scanned"] > 1000, "the scan must have walked the image's files"
    assert report["hits"] == []
    assert report["env_hits"] == []
    assert "ARENA_PLANTED" not in report["env"]
    assert "ARENA_TEST" in report["env"]


ENVIRONMENT = """
import json, os, submission_api
print(json.dumps({"env": dict(os.environ), "api": submission_api.__file__, "cwd": os.getcwd()}))
"""


def test_environment_is_the_allowlist_and_submission_api_is_importable(run_script):
    result = run_script(ENVIRONMENT)
    assert result.exit_code == 0, result.stderr
    seen = json.loads(result.stdout)
    assert seen["env"]["PYTHONPATH"] == "/opt/arena"
    assert seen["env"]["ARENA_TEST"] == "1"
    assert seen["env"]["HOME"] == "/tmp"
    assert seen["api"].startswith("/opt/arena/submission_api/")
    assert seen["cwd"] == "/submission"


def test_only_the_submission_api_package_is_mounted_from_the_project(run_script):
    result = run_script("import os; print(sorted(os.listdir('/opt/arena')))")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == "['submission_api']"


def test_a_missing_image_is_a_platform_error_not_a_participant_outcome(docker_client, tmp_path):
    for name in ("submission", "bundle"):
        (tmp_path / name).mkdir()
    spec = SandboxSpec(image="metadl-arena/no-such-image:never", command=("true",),
                       submission_dir=tmp_path / "submission", bundle_dir=tmp_path / "bundle",
                       output_dir=tmp_path / "output")
    with pytest.raises(SandboxPlatformError, match="no-such-image"):
        run_sandbox(docker_client, spec, SandboxLimits(wall_time_s=10.0))


def test_output_is_copied_back_without_links(run_script, tmp_path):
    if pick_mechanism() != "loop":
        pytest.skip("the watchdog output mechanism (non-root worker) mounts the folder as is")
    source = """
import os
os.makedirs("/output/predictions")
open("/output/predictions/task_00000.npy", "wb").write(b"data")
os.symlink("/etc/passwd", "/output/link")
os.mkfifo("/output/fifo")
"""
    result = run_script(source)
    assert result.ok, result
    output = Path(tmp_path / "output")
    assert (output / "predictions" / "task_00000.npy").read_bytes() == b"data"
    assert not (output / "link").exists() or not (output / "link").is_symlink()
    assert not (output / "fifo").exists()
