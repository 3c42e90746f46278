"""Prepare: the phase's collection from cached entries, and the call into the runner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from worker_fakes import make_claimed

from worker.pipeline.errors import CacheCorruptError
from worker.pipeline.fetch import fetch_datasets
from worker.pipeline.prepare import build_collection, prepare_bundle


def test_collection_groups_datasets_by_their_splits(fake_client, tmp_path: Path):
    entries = fetch_datasets(fake_client, fake_client.claimed, "tok", tmp_path)
    collection = build_collection(fake_client.claimed, entries)
    assert collection.splits == {"meta-train": ["train_ds"], "meta-test": ["test_ds"]}
    assert collection.datasets["train_ds"].name == "train_ds"
    assert collection.datasets["test_ds"].labels.tolist() == [0, 0, 0, 1, 1, 1]


def test_dataset_in_no_split_is_kept_for_the_protocol_and_splits_stay_present(phase_files,
                                                                              fake_client,
                                                                              tmp_path: Path):
    refs = [{**phase_files.refs[0], "split": None, "splits": []}, phase_files.refs[1]]
    claimed = make_claimed(phase_files.submission, refs)
    entries = fetch_datasets(fake_client, claimed, "tok", tmp_path)
    collection = build_collection(claimed, entries)
    assert sorted(collection.datasets) == ["test_ds", "train_ds"]
    assert collection.splits == {"meta-train": [], "meta-test": ["test_ds"]}


def test_entry_that_does_not_open_is_removed_and_reported_as_cache_fault(fake_client,
                                                                         tmp_path: Path):
    entries = fetch_datasets(fake_client, fake_client.claimed, "tok", tmp_path)
    (entries["test_ds"] / "labels.npy").unlink()
    with pytest.raises(CacheCorruptError, match="test_ds"):
        build_collection(fake_client.claimed, entries)
    assert not entries["test_ds"].exists()


def test_prepare_passes_protocol_seeds_and_threads_to_the_runner(fake_client, tmp_path: Path):
    calls: list[tuple[Any, ...]] = []
    claimed = fake_client.claimed.model_copy(update={"protocol": {"name": "fixed", "n_ways": 5}})
    prepare_bundle(claimed, "collection", tmp_path / "b", tmp_path / "a",
                   prepare_run=lambda *args: calls.append(args),
                   parse_protocol=lambda data: ("parsed", data["n_ways"]))
    assert calls == [("collection", ("parsed", 5), (11, 2), tmp_path / "b", tmp_path / "a", 2)]
