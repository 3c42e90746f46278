"""Every test carries the tier of its folder (tests/conftest.py), so `-m unit` selects the unit
tier and the unit tier's process check applies (64947e0 dropped the marking hook by mistake:
`-m unit` then selected nothing, and nothing said so)."""

from __future__ import annotations

import pytest


def test_a_unit_test_is_marked_unit_and_nothing_else(request: pytest.FixtureRequest):
    marks = {m.name for m in request.node.iter_markers()}
    assert "unit" in marks and not marks & {"integration", "e2e", "docker", "browser"}, marks


def test_every_collected_test_has_a_tier(request: pytest.FixtureRequest):
    tiers = {"unit", "integration", "e2e", "browser"}
    untiered = [item.nodeid for item in request.session.items
                if not {m.name for m in item.iter_markers()} & tiers]
    assert untiered == [], untiered[:10]
