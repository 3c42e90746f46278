"""Every evaluation protocol end to end on the participant's path (`arena run`'s `run_local`:
prepare, participant subprocess, scorer, report) with the protonet baseline, meta-trained on a
handful of tasks (ARENA_BASELINE_QUICK=1), on a small generated collection. Each protocol keeps
its own task shape; only the number of tasks is lowered. scores.json and detailed_results.html
must carry the protocol's own figures.

The collection is the sample generator's, smaller (5 classes x 40 images; "scripts" keeps its 34
classes for within-domain), with "glyphs" moved to a meta-valid split so that id-ood has ValGen
tasks. 40 images per class, as in Meta-Album: id-ood holds out 8 (5 queries + 3 shots),
and FewSTAB finds 5 distinct attributes lacking from 15 query images.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from starting_kit.sample_data import generate_collection
from submission_api.protocols import PROTOCOLS, ProtocolParams
from submission_api.runner.local import run_local

pytestmark = pytest.mark.slow

PROTONET = Path(__file__).resolve().parents[2] / "starting_kit" / "baselines" / "protonet"
TASKS_PER_DATASET = 2
SPLITS = {"meta-train": ["stripes", "blobs"], "meta-valid": ["glyphs"],
          "meta-test": ["spectra", "mosaic"]}


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = generate_collection(tmp_path_factory.mktemp("protocols") / "col", n_classes=5,
                               n_images=40)
    (root / "info" / "meta_splits.txt").write_text(json.dumps(SPLITS))
    yield root


@pytest.fixture(scope="module")
def runs(collection: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple]:
    """protocol -> (scores.json document, detailed_results.html text), one run each."""
    cache, out = tmp_path_factory.mktemp("cache"), tmp_path_factory.mktemp("out")
    results = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ARENA_BASELINE_QUICK", "1")
        for name in PROTOCOLS:
            # Meta-Dataset's bilevel sampling refuses mosaic here: its 5 classes fall in 4
            # lattices (super-categories), none with the 5 classes an episode needs.
            # Twice the tasks on its one dataset, so that its interval rests on 4 tasks.
            extra = ({"datasets": ("spectra",), "tasks_per_dataset": 2 * TASKS_PER_DATASET}
                     if name == "meta-dataset" else {"tasks_per_dataset": TASKS_PER_DATASET})
            params = ProtocolParams(name=name, split_seed=1, **extra)
            result = run_local(PROTONET, collection, out / name, protocol=params, seed=0,
                               phase_seed=1, cache_dir=cache)
            assert result.state == "finished", f"{name}: {result.reason}: {result.message}"
            page = (out / name / "detailed_results.html").read_text(encoding="utf-8")
            results[name] = (json.loads((out / name / "scores.json").read_text()), page)
    return results


def _table(page: str, section: str) -> str:
    match = re.search(rf'<(?:section|table) id="{section}">(.*?)</(?:section|table)>', page,
                      re.S)
    assert match, f"no {section} in the page"
    return match.group(1)


@pytest.mark.parametrize("name", PROTOCOLS)
def test_protonet_finishes_every_protocol_with_a_score_in_range(runs, name):
    scores, page = runs[name]
    assert scores["n_tasks"] == len(scores["tasks"]) > 0
    assert -1.0 <= scores["score"] <= 1.0
    assert f"<td class=\"text\">{name}</td>" in page


def test_cross_domain_and_fixed_test_each_meta_test_dataset(runs):
    for name in ("cross-domain", "fixed"):
        per_dataset = runs[name][0]["summary"]["per_dataset"]
        assert {k: v["n"] for k, v in per_dataset.items()} == {"spectra": 2, "mosaic": 2}
    assert {(t["ways"], t["shots"]) for t in runs["fixed"][0]["tasks"]} == {(5, 5)}


def test_meta_dataset_reports_its_interval(runs):
    scores, page = runs["meta-dataset"]
    md = scores["summary"]["md_ci95"]
    assert md is not None and md > 0
    assert all(t["ways"] >= 5 for t in scores["tasks"])
    row = re.search(r'<tr id="md-interval">(.*?)</tr>', _table(page, "headline"), re.S)
    assert row and f"&plusmn; {md:.3f}" in row.group(1)
    assert 'id="md-interval"' not in runs["cross-domain"][1]


def test_within_domain_tests_the_dataset_its_split_can_serve_and_reports_it(runs):
    scores, page = runs["within-domain"]
    assert list(scores["summary"]["per_dataset"]) == ["scripts"]
    assert {(t["ways"], t["shots"]) for t in scores["tasks"]} == {(5, 5)}
    assert re.search(r'<tr class="dataset"><td class="text">scripts</td>',
                     _table(page, "per-dataset"))


def test_id_ood_reports_basegen_valgen_and_novelgen(runs):
    scores, page = runs["id-ood"]
    summary = scores["summary"]
    assert list(summary["id_ood"]) == ["BaseGen", "ValGen", "NovelGen"]
    assert {g: v["n"] for g, v in summary["per_group"].items()} == {
        "BaseGen": 4, "ValGen": 2, "NovelGen": 4}
    section = _table(page, "id-ood")
    for group in ("BaseGen", "NovelGen"):  # two results; ValGen apart, as snapshot selection
        assert f'<td class="text">{group}</td><td>{summary["id_ood"][group]:.3f}' in section
    valgen = re.search(r'<p class="muted" id="id-ood-ValGen">(.*?)</p>', page, re.S)
    assert valgen and f'{summary["id_ood"]["ValGen"]:.3f}' in valgen.group(1)
    assert 'id="id-vs-ood-figure"' in page


def test_fewstab_reports_both_waccs_and_their_gap(runs):
    scores, page = runs["fewstab"]
    summary = scores["summary"]
    wacc = summary["wacc_per_group"]
    assert {g: v["n"] for g, v in wacc.items()} == {"fewstab-A": 2, "fewstab-R": 2}
    assert summary["wacc_gap"] == pytest.approx(wacc["fewstab-R"]["mean"]
                                                - wacc["fewstab-A"]["mean"])
    section = _table(page, "fewstab")
    assert "wAcc-A" in section and "wAcc-R" in section
    assert f"{summary['wacc_gap']:.3f}" in section
    assert 'id="fewstab"' not in runs["id-ood"][1]
