"""One run end to end in the unsandboxed local mode, with the real runner: the worker's
preparation, participant side and scoring contracts agree (a fake server serves the files)."""

from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from submission_api.data.compiled import (
    EntryMeta,
    create_image_file,
    finalize_entry,
    new_staging_dir,
)
from submission_api.runner.prepare import prepare_run
from submission_api.runner.scorer import score_output
from worker.client import ClaimedRun
from worker.local_executor import make_local_executor
from worker.pipeline.evaluate import RunResult, Runtime, evaluate_run
from worker.pipeline.wiring import parse_protocol

RANDOM_BASELINE = Path(__file__).parents[3] / "starting_kit" / "baselines" / "random"
SMALL_CONFIG = '{"train_config": {"N": 2, "k": 1, "query_images_per_class": 2}}'
FAILING_MODEL = """
from submission_api.api import Learner, MetaLearner
class MyMetaLearner(MetaLearner):
    def meta_fit(self, meta_train_generator, meta_valid_generator):
        raise RuntimeError("meta_fit exploded on purpose")
class MyLearner(Learner):
    pass
"""


def compiled_tar(parent: Path, name: str, seed: int) -> tuple[str, bytes]:
    """A compiled entry of 3 classes x 6 random images, as the server's tar."""
    staging = new_staging_dir(parent)
    images = create_image_file(staging, 18)
    images[:] = np.random.default_rng(seed).integers(0, 255, images.shape, dtype=np.uint8)
    images.flush()
    del images
    meta = EntryMeta(name=name, labels=np.repeat(np.arange(3, dtype=np.int64), 6),
                     class_names=("a", "b", "c"))
    content_hash = finalize_entry(staging, meta)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for item in sorted(staging.iterdir()):
            archive.add(item, arcname=item.name)
    return content_hash, buffer.getvalue()


def zip_files(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


class FileServer:
    """The server's side of the internal API, in memory; records finish and release bodies."""

    def __init__(self, claimed: ClaimedRun, submission: bytes, tars: dict[str, bytes]) -> None:
        self.claimed, self.submission, self.tars = claimed, submission, tars
        self.finished: list[dict[str, Any]] = []
        self.released: list[str] = []

    def claim(self, run_id: Any, token: str, worker: str) -> ClaimedRun:
        return self.claimed

    def heartbeat(self, *args: Any, **kwargs: Any) -> bool:
        return True

    def finish(self, run_id: Any, token: str, body: dict[str, Any]) -> bool:
        self.finished.append(body)
        return True

    def release(self, run_id: Any, token: str, fencing_token: int, error: str) -> bool:
        self.released.append(error)
        return True

    def download_submission(self, run_id: Any, token: str, dest: Path) -> None:
        dest.write_bytes(self.submission)

    def download_dataset(self, content_hash: str, token: str, dest: Path) -> None:
        dest.write_bytes(self.tars[content_hash])


@pytest.mark.parametrize(("model", "state", "reason"), [
    ((RANDOM_BASELINE / "model.py").read_text(), "finished", None),
    (FAILING_MODEL, "failed", "meta_fit_error"),
])
def test_local_mode_runs_and_scores_a_submission_with_the_real_runner(tmp_path, model, state,
                                                                      reason):
    train_hash, train_tar = compiled_tar(tmp_path, "train", seed=1)
    test_hash, test_tar = compiled_tar(tmp_path, "test", seed=2)
    submission = zip_files({"model.py": model, "config.json": SMALL_CONFIG})
    claimed = ClaimedRun.model_validate({
        "run_id": 1, "fencing_token": 1, "lease_expires_at": datetime(2030, 1, 1, tzinfo=UTC),
        "submission_sha256": hashlib.sha256(submission).hexdigest(),
        "protocol": {"name": "fixed", "n_ways": 2, "n_shots": 1, "n_queries": 2,
                     "tasks_per_dataset": 2},
        "test_seed": 5, "participant_seed": 1, "time_limit_s": 120, "image": "unused",
        "datasets": [{"name": "train", "content_hash": train_hash, "split": "meta-train"},
                     {"name": "test", "content_hash": test_hash, "split": "meta-test"}]})
    server = FileServer(claimed, submission, {train_hash: train_tar, test_hash: test_tar})
    runtime = Runtime(client=server, execute=make_local_executor(), prepare_run=prepare_run,
                      parse_protocol=parse_protocol, score_output=score_output,
                      worker_name="local/0", cache_dir=tmp_path / "cache",
                      runs_dir=tmp_path / "runs", heartbeat_interval_s=5)
    assert evaluate_run(1, "tok", runtime) is RunResult.PUBLISHED, server.released
    [body] = server.finished
    assert (body["state"], body["reason"]) == (state, reason), (body["message"], body["log"])
    if state == "finished":
        assert body["summary"]["n_tasks"] == len(body["tasks"]) == 2
    else:
        assert "meta_fit exploded on purpose" in body["message"]
        assert "Traceback" in body["message"]
