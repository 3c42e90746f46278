"""What the sandbox can read of a prepared run carries only the participant seed (issue 12,
item 2): the bundle is searched, file by file, for the test seed in every form a program could
recover it from (decimal text, 8-byte little- or big-endian)."""

from __future__ import annotations

import json

from starting_kit.sample_data import generate_collection
from submission_api.data import load_collection
from submission_api.protocols import ProtocolParams
from submission_api.runner.prepare import prepare_run

TEST_SEED = 2**62 + 123_456_789
PARTICIPANT_SEED = 2


def test_the_bundle_the_sandbox_reads_carries_no_test_seed(tmp_path):
    root = generate_collection(tmp_path / "col", n_classes=5, n_images=12,
                               domains=("stripes", "spectra"))
    (root / "info" / "meta_splits.txt").write_text(
        json.dumps({"meta-train": ["stripes"], "meta-test": ["spectra"]}))
    collection = load_collection(root, tmp_path / "cache")
    params = ProtocolParams(name="fixed", n_ways=2, n_shots=1, n_queries=1, tasks_per_dataset=2)
    prepare_run(collection, params, (TEST_SEED, PARTICIPANT_SEED), tmp_path / "bundle",
                tmp_path / "answers")
    forms = (str(TEST_SEED).encode(), TEST_SEED.to_bytes(8, "little"),
             TEST_SEED.to_bytes(8, "big"))
    for path in (tmp_path / "bundle").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not any(form in data for form in forms), path
    info = json.loads((tmp_path / "bundle" / "run.json").read_text())
    assert info["participant_seed"] == PARTICIPANT_SEED
