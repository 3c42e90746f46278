"""How tests treat a missing service (importable by name from any test folder)."""

from __future__ import annotations

import os

import pytest


def require_service(name: str, reason: str) -> None:
    """Skip outside CI; fail in CI, where a missing service is a broken setup, not an excuse."""
    if os.environ.get("CI"):
        pytest.fail(f"{name} is required in CI but unavailable: {reason}")
    pytest.skip(f"{name} unavailable: {reason}")
