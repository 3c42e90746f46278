"""Datasets on the server (issue 13 item 9): the content hash a manifest claims is recomputed
before anything is stored, and each entry is stored once, as the tar workers fetch. Before: any
manifest hash was believed, and each entry was kept twice (its folder, plus a tar built on the
first fetch)."""

from __future__ import annotations

import io
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from compiled_entries import compiled_entry_tar  # noqa: E402


def _upload(env, headers: dict, tar: bytes):
    return env.client.post("/api/v1/datasets", headers=headers,
                           files={"file": ("d.tar", tar, "application/x-tar")})


def _stored(env) -> list[str]:
    folder = env.settings.storage / "datasets"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_an_entry_whose_manifest_lies_about_its_hash_is_refused(env):
    _, org = env.user("olga", role="organizer")
    claimed, tampered = compiled_entry_tar(seed=3, tamper=True)
    answer = _upload(env, org, tampered)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == "dataset.invalid"
    assert "does not hash to" in answer.json()["error"]["message"]
    assert _stored(env) == [] and env.client.get("/api/v1/datasets", headers=org).json() == []


def test_an_entry_is_stored_once_as_the_tar_workers_fetch(env):
    _, org = env.user("olga", role="organizer")
    digest, tar = compiled_entry_tar(seed=4)
    assert _upload(env, org, tar).status_code == 201
    assert _stored(env) == [f"{digest}.tar"]
    data = {"meta_test": [{"name": "D1", "content_hash": digest}]}
    comp = env.client.post("/api/v1/competitions", headers=org, json={
        "slug": "dd", "title": "D", "phases": [{"name": "dev", "status": "open",
                                              "data": data}]}).json()
    assert "phases" in comp, comp
    _, ann = env.user("ann")
    env.submit(comp["phases"][0]["id"], ann)
    run_id, token, _ = env.queue.jobs[-1]
    auth = {"Authorization": f"Bearer {token}"}
    env.client.post(f"/internal/runs/{run_id}/claim", json={"worker": "w"}, headers=auth)
    fetched = env.client.get(f"/internal/datasets/{digest}", headers=auth)
    with tarfile.open(fileobj=io.BytesIO(fetched.content)) as got:
        assert {"manifest.json", "images.u8", "labels.npy"} <= set(got.getnames())
    assert _stored(env) == [f"{digest}.tar"]  # serving it built nothing beside it
