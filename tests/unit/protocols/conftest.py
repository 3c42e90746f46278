"""Fixtures of the protocol tests."""

from __future__ import annotations

import pytest
from protocol_fakes import build_collection

from submission_api.data.collection import Collection


@pytest.fixture
def collection() -> Collection:
    return build_collection()
