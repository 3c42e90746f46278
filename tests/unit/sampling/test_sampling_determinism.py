"""Same seed -> identical episodes, in this process and in another with a different
PYTHONHASHSEED (task sampling never depends on hash(), dict or set order)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from submission_api.sampling import (
    compute_episodes_digest,
    compute_shared_pools,
    make_rng,
    sample_cross_domain_episode,
    sample_disjoint_pools,
    sample_meta_dataset_episode,
)

SCRIPT = """
import sys
sys.path.insert(0, {here!r})
from test_sampling_determinism import draw_digest
print(draw_digest())
"""


def draw_digest(run_seed: int = 7) -> str:
    from sampling_fakes import build_dataset

    ds = build_dataset("d", [40] * 10 + [15] * 10, super_categories=[0, 1] * 10)
    rng = make_rng(2022, run_seed, "d")
    disjoint = sample_disjoint_pools(ds.labels, 20, 20, rng)
    shared = compute_shared_pools(ds.labels, 20)
    episodes = [sample_cross_domain_episode(disjoint, rng, "d") for _ in range(5)]
    episodes += [sample_meta_dataset_episode(shared, rng, "d", ds.super_categories)
                 for _ in range(5)]
    return compute_episodes_digest(episodes)


def test_same_seed_gives_the_same_digest_in_process():
    assert draw_digest() == draw_digest()


def test_digest_is_identical_across_processes_and_hash_seeds():
    here = str(Path(__file__).parent)
    digests = set()
    for hash_seed in ("1", "98765"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run([sys.executable, "-c", SCRIPT.format(here=here)], env=env,
                             capture_output=True, text=True, check=True, cwd=here)
        digests.add(out.stdout.strip())
    assert digests == {draw_digest()}


def test_different_run_seeds_give_different_digests():
    assert draw_digest(7) != draw_digest(8)
