"""`arena serve` refuses secrets anyone could guess (issue 20 item 7).

The placeholder `change-me-in-production`, a secret under 32 bytes, or no test-seed secret at
all: a server started so derives test seeds anyone can recompute from a phase seed written in
a (often published) bundle. The test-seed secret is its own setting, with no fallback to the
CSRF key, and one phase may stay pinned to an old value while the secret rotates.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from server.core.config import PLACEHOLDER_SECRET, InsecureSecretsError, Settings
from server.services.seeds import compute_test_seed

GOOD, OTHER = "k" * 32, "t" * 40


@pytest.mark.parametrize(("secret_key", "seed_secret", "why"), [
    (PLACEHOLDER_SECRET, OTHER, "ARENA_SECRET_KEY is the placeholder"),
    ("short-but-ok-for-pydantic", OTHER, "ARENA_SECRET_KEY has 25 bytes"),
    (GOOD, "", "ARENA_TEST_SEED_SECRET is not set"),
    (GOOD, PLACEHOLDER_SECRET, "ARENA_TEST_SEED_SECRET is the placeholder"),
    (GOOD, "x" * 31, "ARENA_TEST_SEED_SECRET has 31 bytes"),
    (GOOD, GOOD, "equals ARENA_SECRET_KEY"),
])
def test_weak_secrets_are_refused_unless_the_development_flag_is_given(
        tmp_path: Path, secret_key: str, seed_secret: str, why: str) -> None:
    settings = Settings(data_dir=tmp_path, secret_key=secret_key, test_seed_secret=seed_secret)
    with pytest.raises(InsecureSecretsError, match=why):
        settings.check_secrets()
    Settings(data_dir=tmp_path, secret_key=secret_key, test_seed_secret=seed_secret,
             insecure_dev_secrets=True).check_secrets()


def test_strong_secrets_are_accepted(tmp_path: Path) -> None:
    Settings(data_dir=tmp_path, secret_key=GOOD, test_seed_secret=OTHER).check_secrets()


def test_the_test_seed_secret_never_falls_back_to_the_secret_key(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, secret_key=GOOD, test_seed_secret="")
    assert settings.seed_secret == ""
    with pytest.raises(ValueError, match="ARENA_TEST_SEED_SECRET"):
        compute_test_seed(settings.seed_secret_for(1), 1, 7)
    dev = Settings(data_dir=tmp_path, secret_key=GOOD, test_seed_secret="",
                   insecure_dev_secrets=True)
    assert dev.seed_secret not in ("", GOOD)


def test_a_pinned_phase_keeps_its_tasks_while_the_secret_rotates(tmp_path: Path) -> None:
    old = Settings(data_dir=tmp_path, secret_key=GOOD, test_seed_secret=OTHER)
    new = Settings(data_dir=tmp_path, secret_key=GOOD, test_seed_secret="n" * 32,
                   test_seed_secret_by_phase={5: OTHER})
    new.check_secrets()
    assert compute_test_seed(new.seed_secret_for(5), 5, 9) == \
        compute_test_seed(old.seed_secret_for(5), 5, 9)
    assert compute_test_seed(new.seed_secret_for(6), 6, 9) != \
        compute_test_seed(old.seed_secret_for(6), 6, 9)


def test_arena_serve_refuses_to_start_with_the_placeholder(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    env |= {"ARENA_DATA_DIR": str(tmp_path), "ARENA_SECRET_KEY": PLACEHOLDER_SECRET}
    arena = Path(sys.executable).with_name("arena")
    done = subprocess.run([str(arena), "serve", "--port", "1"], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "placeholder" in done.stderr and "ARENA_TEST_SEED_SECRET is not set" in done.stderr
    assert "--dev" in done.stderr
