"""README's "One server, several workers" (issue 24, trap 16): a minimal environment for
`arena serve` and for `arena worker`, naming the same broker URL, and the two settings classes'
defaults agree on it (the server sends jobs where the worker takes them)."""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

from server.core.config import Settings
from worker.settings import WorkerSettings

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_the_readme_shows_one_server_and_its_workers_with_one_broker():
    start = README.index("### One server, several workers")
    section = README[start:README.index("\n#", start + 10)]
    server = re.search(r"ARENA_BROKER_URL=(\S+)", section).group(1)
    worker = re.search(r"ARENA_WORKER_BROKER_URL=(\S+)", section).group(1)
    assert server == worker and not server.endswith("/0")
    for needed in ("arena serve", "arena worker", "ARENA_WORKER_SERVER_URL", "ARENA_SECRET_KEY",
                   "ARENA_WORKER_EXECUTOR"):
        assert needed in section, needed


def test_server_and_worker_default_to_the_same_broker(monkeypatch):
    for name in ("ARENA_BROKER_URL", "ARENA_WORKER_BROKER_URL"):
        monkeypatch.delenv(name, raising=False)
    assert Settings().broker_url == WorkerSettings().broker_url


def bash_blocks(section: str) -> list[str]:
    """The section's ```bash blocks, in order (server host, then worker host)."""
    return re.findall(r"```bash\n(.*?)```", section, re.S)


def exported(block: str) -> dict[str, str]:
    """The variables the block's `export` lines set, read as bash would (comments dropped,
    `$(openssl rand -hex N)` drawn as N random bytes in hex); tests/e2e/
    test_readme_deployment_runs.py runs the block itself, with bash."""
    values = {}
    for line in block.splitlines():
        match = re.match(r"export (\w+)=(\$\([^)]*\)|\S+)", line)
        if match:
            value = re.sub(r"\$\(openssl rand -hex (\d+)\)",
                           lambda m: secrets.token_hex(int(m.group(1))), match.group(2))
            assert "$" not in value, f"{line!r}: a substitution this test does not know"
            values[match.group(1)] = value.strip("'\"")
    return values


def test_the_server_block_sets_every_secret_a_deployment_needs_and_its_public_url(monkeypatch):
    """`arena serve` refuses a deployment without ARENA_TEST_SEED_SECRET (issue 32.6: the
    block printed none), and the login line must name the public URL, not 127.0.0.1."""
    start = README.index("### One server, several workers")
    server_block = bash_blocks(README[start:README.index("\n#", start + 10)])[0]
    assert server_block.strip().splitlines()[-1].startswith("arena serve")
    values = exported(server_block)
    for name in [n for n in os.environ if n.startswith("ARENA_")]:
        monkeypatch.delenv(name)
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    assert settings.secret_problems() == []
    host = re.search(r"--host (\S+) --port (\d+)", server_block)
    assert settings.public_url.startswith("http://") and host is not None
    assert settings.public_url_for("http://0.0.0.0:8000") == settings.public_url.rstrip("/")
