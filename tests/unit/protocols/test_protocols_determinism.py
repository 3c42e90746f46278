"""Planned episodes are identical across processes with different PYTHONHASHSEED values."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from submission_api.protocols import (
    PROTOCOLS,
    ProtocolParams,
    plan_meta_train_view,
    plan_meta_valid_view,
    plan_test_episodes,
)
from submission_api.sampling import compute_episodes_digest

SCRIPT = """
import sys
sys.path.insert(0, {here!r})
from test_protocols_determinism import plan_digest
print(plan_digest())
"""


def plan_digest() -> str:
    """Digest of every protocol's test episodes and both views for one seed."""
    from protocol_fakes import build_collection

    collection = build_collection()
    episodes, views = [], hashlib.sha256()
    for name in PROTOCOLS:
        params = ProtocolParams(name=name, tasks_per_dataset=2, split_seed=5)
        episodes += plan_test_episodes(params, collection, test_seed=113)
        for view in (plan_meta_train_view(params, collection),
                     plan_meta_valid_view(params, collection)):
            for dataset, indices in view.items():
                views.update(f"{name}/{dataset}:".encode() + indices.astype("<i8").tobytes())
    return compute_episodes_digest(episodes) + views.hexdigest()


def test_plans_are_identical_across_processes_and_hash_seeds():
    here = str(Path(__file__).parent)
    digests = set()
    for hash_seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run([sys.executable, "-c", SCRIPT.format(here=here)], env=env,
                             capture_output=True, text=True, check=True, cwd=here)
        digests.add(out.stdout.strip())
    assert digests == {plan_digest()}
