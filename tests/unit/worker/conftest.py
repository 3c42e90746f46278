"""Fixtures of the worker's unit tests: the files of a tiny phase and a fake client serving them."""

from __future__ import annotations

from pathlib import Path

import pytest
from worker_fakes import (
    FakeClient,
    PhaseFiles,
    make_claimed,
    make_compiled_entry,
    make_zip,
    tar_entry,
)


@pytest.fixture
def phase_files(tmp_path: Path) -> PhaseFiles:
    source = tmp_path / "source"
    source.mkdir()
    train, train_hash = make_compiled_entry(source, "train_ds", fill=0)
    test, test_hash = make_compiled_entry(source, "test_ds", fill=100)
    return PhaseFiles(
        submission=make_zip({"model.py": "class MyMetaLearner: pass\nclass MyLearner: pass\n"}),
        tars={train_hash: tar_entry(train), test_hash: tar_entry(test, top="entry")},
        refs=[{"name": "train_ds", "content_hash": train_hash, "split": "meta-train"},
              {"name": "test_ds", "content_hash": test_hash, "splits": ["meta-test"]}],
    )


@pytest.fixture
def fake_client(phase_files: PhaseFiles) -> FakeClient:
    return FakeClient(claimed=make_claimed(phase_files.submission, phase_files.refs),
                      submission=phase_files.submission, datasets=dict(phase_files.tars))
