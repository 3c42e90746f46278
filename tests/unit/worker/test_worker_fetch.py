"""Fetch: the content-addressed cache of submissions and compiled datasets."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from worker_fakes import make_zip

from submission_api.data.compiled import open_compiled
from worker.pipeline.errors import CacheCorruptError, ParticipantFault
from worker.pipeline.fetch import (
    extract_submission,
    fetch_dataset,
    fetch_datasets,
    fetch_submission,
)

TOKEN = "tok"


def test_submission_is_downloaded_once_and_served_from_the_cache(fake_client, tmp_path: Path):
    first = fetch_submission(fake_client, fake_client.claimed, TOKEN, tmp_path / "cache")
    second = fetch_submission(fake_client, fake_client.claimed, TOKEN, tmp_path / "cache")
    assert first == second == tmp_path / "cache/submissions" / (
        fake_client.claimed.submission_sha256 + ".zip")
    assert first.read_bytes() == fake_client.submission
    assert len(fake_client.named("download_submission")) == 1


def test_corrupt_cached_submission_is_fetched_again(fake_client, tmp_path: Path):
    path = fetch_submission(fake_client, fake_client.claimed, TOKEN, tmp_path)
    path.write_bytes(b"bit rot")
    assert fetch_submission(fake_client, fake_client.claimed, TOKEN, tmp_path).read_bytes() == (
        fake_client.submission)
    assert len(fake_client.named("download_submission")) == 2


def test_submission_not_matching_its_hash_is_a_cache_fault_and_leaves_nothing(fake_client,
                                                                               tmp_path: Path):
    fake_client.submission = b"other bytes"
    with pytest.raises(CacheCorruptError, match="hashes to"):
        fetch_submission(fake_client, fake_client.claimed, TOKEN, tmp_path)
    assert list((tmp_path / "submissions").iterdir()) == []


def test_unsafe_zip_is_the_participants_invalid_submission(tmp_path: Path):
    zip_path = tmp_path / "s.zip"
    zip_path.write_bytes(make_zip({"../evil.py": "x", "model.py": "y"}))
    with pytest.raises(ParticipantFault) as caught:
        extract_submission(zip_path, tmp_path / "out")
    assert caught.value.reason == "invalid_submission"


def test_safe_zip_extracts_to_the_folder_holding_model_py(tmp_path: Path):
    zip_path = tmp_path / "s.zip"
    zip_path.write_bytes(make_zip({"model.py": "y", "helpers/util.py": "z"}))
    root = extract_submission(zip_path, tmp_path / "out")
    assert (root / "model.py").read_text() == "y"


def test_datasets_unpack_from_root_or_single_folder_tars_into_verified_entries(
        fake_client, tmp_path: Path):
    entries = fetch_datasets(fake_client, fake_client.claimed, TOKEN, tmp_path)
    for ref in fake_client.claimed.datasets:
        assert entries[ref.name] == tmp_path / "datasets" / ref.content_hash
        assert open_compiled(entries[ref.name]).content_hash == ref.content_hash
    assert not [p for p in (tmp_path / "datasets").iterdir() if p.name.startswith(".tmp")]


def test_cached_dataset_is_not_downloaded_again(fake_client, tmp_path: Path):
    ref = fake_client.claimed.datasets[0]
    fetch_dataset(fake_client, ref, TOKEN, tmp_path)
    fetch_dataset(fake_client, ref, TOKEN, tmp_path)
    assert fake_client.named("download_dataset") == [ref.content_hash]


def test_damaged_cached_dataset_is_removed_and_fetched_again(fake_client, tmp_path: Path):
    ref = fake_client.claimed.datasets[0]
    entry = fetch_dataset(fake_client, ref, TOKEN, tmp_path)
    (entry / "images.u8").write_bytes(b"truncated")
    again = fetch_dataset(fake_client, ref, TOKEN, tmp_path)
    assert open_compiled(again).content_hash == ref.content_hash
    assert len(fake_client.named("download_dataset")) == 2


def test_download_with_tampered_pixels_is_a_cache_fault(fake_client, tmp_path: Path):
    ref = fake_client.claimed.datasets[0]
    other = fake_client.claimed.datasets[1]
    fake_client.datasets[ref.content_hash] = fake_client.datasets[other.content_hash]
    with pytest.raises(CacheCorruptError, match="does not hash"):
        fetch_dataset(fake_client, ref, TOKEN, tmp_path)
    assert not (tmp_path / "datasets" / ref.content_hash).exists()


@pytest.mark.parametrize("payload", [b"not a tar at all", b""])
def test_unreadable_dataset_tar_is_a_cache_fault(fake_client, tmp_path: Path, payload: bytes):
    ref = fake_client.claimed.datasets[0]
    fake_client.datasets[ref.content_hash] = payload
    with pytest.raises(CacheCorruptError):
        fetch_dataset(fake_client, ref, TOKEN, tmp_path)


def test_concurrent_fetches_of_one_dataset_download_it_once(fake_client, tmp_path: Path):
    ref = fake_client.claimed.datasets[0]
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(
        fetch_dataset(fake_client, ref, TOKEN, tmp_path))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(results)) == 1 and len(results) == 4
    assert fake_client.named("download_dataset") == [ref.content_hash]
