"""The example bundles run as shipped (issue 14, item 12): the CPU variant stays the GPU bundle
but for its slug, title, resources and image, and `--start` moves every phase date by one
offset (order, durations and comments kept)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from starting_kit.commands.bundle_client import parse_start, shift_dates
from starting_kit.commands.remote_client import RemoteError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "neurips22"
VARIANT_KEYS = ("slug", "title")
PHASE_VARIANT_KEYS = ("resources", "image")


def _without_variant_keys(path: Path) -> dict:
    bundle = yaml.safe_load(path.read_text())
    for key in VARIANT_KEYS:
        bundle.pop(key)
    for phase in bundle["phases"]:
        for key in PHASE_VARIANT_KEYS:
            phase.pop(key, None)
    return bundle


def test_the_cpu_bundle_is_the_gpu_bundle_without_a_gpu():
    cpu = yaml.safe_load((EXAMPLES / "competition-cpu.yaml").read_text())
    assert _without_variant_keys(EXAMPLES / "competition-cpu.yaml") == _without_variant_keys(
        EXAMPLES / "competition.yaml")
    assert all(p["resources"]["gpus"] == 0 and p["image"].endswith(":cpu")
               for p in cpu["phases"])


def test_start_moves_every_date_by_one_offset_keeping_order_and_comments():
    text = (EXAMPLES / "competition.yaml").read_text()
    start = datetime(2031, 3, 1, 9, 0, tzinfo=UTC)
    moved, offset = shift_dates(text, start)
    before = yaml.safe_load(text)["phases"]
    after = yaml.safe_load(moved)["phases"]
    assert min(p["starts_at"] for p in after) == start
    for old, new in zip(before, after, strict=True):
        for key in ("starts_at", "ends_at"):
            if key in old:
                assert new[key] - old[key] == offset
    assert [line for line in moved.splitlines() if line.lstrip().startswith("#")] == [
        line for line in text.splitlines() if line.lstrip().startswith("#")]


def test_start_accepts_now_or_a_date_and_says_what_else():
    assert abs(parse_start("now") - datetime.now(UTC)) < timedelta(seconds=5)
    assert parse_start("2031-01-15") == datetime(2031, 1, 15, tzinfo=UTC)
    with pytest.raises(RemoteError, match="expected 'now' or a date"):
        parse_start("tomorrow")
