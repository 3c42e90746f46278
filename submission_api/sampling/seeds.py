"""Where every random generator of a run comes from.

A generator is built from `numpy.random.SeedSequence([seed, *keys])`, where `seed` is the phase's
secret test seed for test tasks and the run's participant seed for everything the participant
side draws (meta-train tasks, the seeds handed to participant code); string keys
(dataset names, purposes) become integers through sha256, never through `hash()`, whose value
changes with PYTHONHASHSEED. Keying by name rather than by position means that adding a dataset
to a collection leaves the episodes of the others unchanged.
"""

from __future__ import annotations

import hashlib

import numpy as np


def compute_stable_key(value: int | str) -> int:
    """A non-negative integer for `value`: itself for ints, 64 bits of sha256 for strings."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(
            f"Seed key {value!r} of type {type(value).__name__}, expected int or str; "
            "pass dataset names or integer seeds."
        )
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"Seed key {value}, expected a non-negative integer.")
        return value
    return int.from_bytes(hashlib.sha256(value.encode("utf-8")).digest()[:8], "little")


def compute_seed_words(*keys: int | str, words: int = 1) -> list[int]:
    """`words` 32-bit seeds drawn from `SeedSequence([compute_stable_key(k) for k in keys])`:
    the seeds handed to Python's, NumPy's and torch's global generators in participant
    processes (meta-train, each test task), which take integers rather than a Generator."""
    entropy = [compute_stable_key(k) for k in keys]
    return [int(word) for word in np.random.SeedSequence(entropy).generate_state(words)]


def make_rng(*keys: int | str) -> np.random.Generator:
    """A PCG64 generator seeded from `SeedSequence([compute_stable_key(k) for k in keys])`."""
    entropy = [compute_stable_key(k) for k in keys]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))
