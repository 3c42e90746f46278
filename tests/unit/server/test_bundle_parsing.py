"""Bundle parsing: every validation problem names the YAML line to fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.bundles import BundleError, parse_bundle
from server.bundles.schema import parse_duration, parse_memory_mb

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "neurips22" / "competition.yaml"
HASH = "ab" * 32
GOOD = f"""slug: demo
title: Demo
leagues:
  - name: free
    final_threshold: 0.2
phases:
  - name: feedback
    time_limit: 5h
    data:
      meta_test: [D1@{HASH}]
  - name: final
    carry_from: feedback
"""


def problems(text: str) -> list[tuple[int, str]]:
    with pytest.raises(BundleError) as caught:
        parse_bundle(text)
    return [(e["line"], e["where"]) for e in caught.value.details["errors"]]


@pytest.mark.parametrize(("old", "new", "line", "where"), [
    ("time_limit: 5h", "time_limit: soon", 8, "phases[0].time_limit"),
    ("    final_threshold: 0.2", "    final_threshold: high", 5, "leagues[0].final_threshold"),
    ("carry_from: feedback", "carry_from: feedbak", 12, "phases[1].carry_from"),
    (f"D1@{HASH}", "D1", 10, "phases[0].data.meta_test[0]"),
    ("    time_limit: 5h", "    time_limit: 5h\n    quotas: {per_day: -1}", 9,
     "phases[0].quotas.per_day"),
    ("    time_limit: 5h", "    time_limit: 5h\n    protocol: {name: nope}", 9,
     "phases[0].protocol"),
    ("    time_limit: 5h", "    time_limt: 5h", 8, "phases[0].time_limt"),
    ("slug: demo", "slug: Not A Slug", 1, "slug"),
])
def test_a_problem_points_at_its_line(old, new, line, where):
    assert problems(GOOD.replace(old, new)) == [(line, where)]


def test_bad_yaml_syntax_points_at_its_line():
    assert problems(GOOD.replace("title: Demo", "title: [Demo"))[0][0] >= 2


def test_a_good_bundle_parses_with_hashes_per_role():
    parsed = parse_bundle(GOOD)
    assert parsed.data["feedback"]["meta_test"] == [{"name": "D1", "content_hash": HASH}]
    assert parsed.spec.phases[0].time_limit == 5 * 3600


def test_the_example_needs_its_local_collection_resolved():
    text = EXAMPLE.read_text()
    assert {w for _, w in problems(text)} == {f"phases[{i}].data.path" for i in range(3)}
    names = ["stripes", "blobs", "glyphs", "spectra", "mosaic"]
    parsed = parse_bundle(text, {"data": {"datasets": {n: HASH for n in names}, "splits": {}}})
    final = parsed.spec.phases[2]
    assert (final.runs_per_submission, final.time_limit, final.carry_from) == (3, 9 * 3600,
                                                                             "feedback")
    feedback = parsed.spec.phases[1]
    assert (feedback.quotas.per_day, feedback.quotas.total) == (2, 100)
    assert [lg.final_threshold for lg in parsed.spec.leagues] == [0.30, 0.20]


@pytest.mark.parametrize(("raw", "seconds"), [(90, 90), ("5h", 18000), ("1h30m", 5400),
                                              ("45s", 45), ("90m", 5400)])
def test_durations(raw, seconds):
    assert parse_duration(raw) == seconds


@pytest.mark.parametrize(("raw", "mb"), [(512, 512), ("16G", 16384), ("512M", 512),
                                         ("1.5GB", 1536)])
def test_memory(raw, mb):
    assert parse_memory_mb(raw) == mb


def test_a_bundle_carries_terms_tabs_teams_and_fact_sheet_questions():
    """Issue 23's bundle fields: validated, unknown keys and odd questions refused."""
    import pydantic
    import pytest

    from server.bundles.schema import BundleSpec

    spec = BundleSpec.model_validate({
        "slug": "cc", "title": "C", "terms": "Be nice.",
        "tabs": {"overview": "Hi", "starting_kit": "https://example.org/kit.zip"},
        "teams": {"allowed": True, "max_size": 3, "lock_at": "2030-01-01T00:00:00Z"},
        "phases": [{"name": "final", "factsheet": [
            {"key": "method", "label": "Your method", "required": True},
            {"key": "pretrained", "label": "Pre-trained?", "kind": "choice",
             "choices": ["yes", "no"]}]}]})
    assert spec.teams.max_size == 3 and spec.phases[0].factsheet[1].choices == ["yes", "no"]
    for bad in ({"kind": "choice", "choices": ["only"]}, {"kind": "number", "choices": ["a"]}):
        with pytest.raises(pydantic.ValidationError):
            BundleSpec.model_validate({"slug": "cc", "title": "C", "phases": [
                {"name": "p", "factsheet": [{"key": "k", "label": "L", **bad}]}]})
    with pytest.raises(pydantic.ValidationError):
        BundleSpec.model_validate({"slug": "cc", "title": "C", "teams": {"lock_at":
                                   "2030-01-01T00:00:00"}, "phases": [{"name": "p"}]})
