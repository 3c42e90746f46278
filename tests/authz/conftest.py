"""Fixtures of the authorization suite: the real app in process with one actor per role."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))

from inprocess_support import cheap_password_hashing  # noqa: E402 - needs the path above


@pytest.fixture(autouse=True, scope="module")
def _cheap_password_hashing() -> Iterator[None]:
    """Who may do what does not depend on argon2's cost: the smallest one here (its docstring)."""
    with cheap_password_hashing():
        yield
