"""Which seeds a run uses, and who may see them.

Test tasks depend on the phase alone (every run of a submission meets the same tasks, as in
MetaDL). Their seed is an HMAC of the phase (id and organizer-set seed) under a server secret
(`Settings.test_seed_secret`, its own setting: never the CSRF `secret_key`, so that rotating
one never changes the other's uses), so that the public data
(Meta-Album is public) and anything a participant can read — the phase's settings, the run's
participant seed, the sandbox's files — are not enough to regenerate the test tasks and their
labels. It leaves the server only in the worker's claim response.

The participant seed of a run is its index (0..R-1): it seeds what the participant side draws
(meta-train tasks, Python/NumPy/torch seeds) and is the only seed the sandbox sees. It carries
nothing about the test tasks, so it is shown to its owner, as are the run's index and score.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

TEST_SEED_CONTEXT = "metadl-arena/test-seed/v1"
"""Domain separation: the HMAC of this secret is never used for anything else."""


def compute_test_seed(secret: str, phase_id: int, phase_seed: int) -> int:
    """The phase's test seed: 63 bits of HMAC-SHA256(secret, context|phase id|phase seed).

    Raises:
        ValueError: an empty secret (the seed would then be public).
    """
    if not secret:
        raise ValueError("received an empty test-seed secret; expected the server's "
                         "ARENA_TEST_SEED_SECRET (at least 32 random bytes). Fix: set it, e.g. "
                         "`export ARENA_TEST_SEED_SECRET=$(openssl rand -hex 32)`.")
    message = f"{TEST_SEED_CONTEXT}|{int(phase_id)}|{int(phase_seed)}".encode()
    digest = hmac.new(secret.encode("utf-8"), message, hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def compute_participant_seed(run: Any) -> int:
    """The run's participant-side seed: its stored seed (the run index 0..R-1)."""
    return int(run.seed)


def redact_protocol(protocol: dict[str, Any] | None) -> dict[str, Any]:
    """A phase's protocol as a participant sees it: without `split_seed` (staff only)."""
    return {k: v for k, v in (protocol or {}).items() if k != "split_seed"}
