"""What a participant shapes (/output trees, zip names, message text) always ends in a verdict.

Each case below was a free run at will on 08e9140 (issue 21): the trusted side raised
(RecursionError, OSError "File name too long", UnicodeEncodeError) and the run ended as an
uncharged platform error, repeatable. Now each ends in the participant's verdict, or is sent
intact, and the worker's scratch folder is removed whatever the tree.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import os
import threading
from pathlib import Path

import pytest
from test_worker_client import make_client, server  # noqa: F401 - the fixture
from test_worker_evaluate import FakeExecutor, run
from worker_fakes import make_zip

from worker.output_walk import (
    MAX_OUTPUT_DEPTH,
    TOO_BIG,
    compute_usage,
    copy_regular_tree,
    remove_tree,
)
from worker.pipeline.evaluate import RunResult
from worker.pipeline.execute import ExecutionRequest, ExecutionResult
from worker.pipeline.faults import is_platform_fault
from worker.sandbox_output import WatchdogArea


@pytest.fixture(autouse=True)
def _remove_deep_trees(tmp_path):
    """pytest's own clean-up of old temp folders recurses (shutil.rmtree): leave no deep tree."""
    yield
    remove_tree(tmp_path)


def make_deep_tree(root: Path, depth: int, name: str = "d") -> None:
    """`depth` nested folders under `root`, built on descriptors (the path outgrows PATH_MAX)."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            child = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = child
        with open(os.open("leaf", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as leaf:
            leaf.write("x")
    finally:
        os.close(fd)


@pytest.mark.parametrize("depth", [1_500, 5_000])
def test_a_deep_output_tree_is_over_every_bound_never_a_crash(tmp_path, depth):
    make_deep_tree(tmp_path / "out", depth)
    assert compute_usage(tmp_path / "out") == TOO_BIG
    assert WatchdogArea(tmp_path / "out", limit_mb=1).exceeded()


def test_paths_longer_than_path_max_are_measured_copied_as_far_as_possible_and_removed(
        tmp_path):
    make_deep_tree(tmp_path / "out", 40, "n" * 200)  # 8,000 characters: past PATH_MAX
    assert 40 * 4096 <= compute_usage(tmp_path / "out") < TOO_BIG
    copy_regular_tree(tmp_path / "out", tmp_path / "copy", budget_bytes=1 << 20)  # no raise
    remove_tree(tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_tree_within_its_bounds_is_measured_and_copied(tmp_path):
    make_deep_tree(tmp_path / "out", MAX_OUTPUT_DEPTH - 1)
    (tmp_path / "out" / "predictions.npy").write_bytes(b"p" * 10_000)
    assert 10_000 < compute_usage(tmp_path / "out") < TOO_BIG
    copy_regular_tree(tmp_path / "out", tmp_path / "copy", budget_bytes=1 << 20)
    assert (tmp_path / "copy" / "predictions.npy").read_bytes() == b"p" * 10_000
    leaf = tmp_path / "copy" / Path(*["d"] * (MAX_OUTPUT_DEPTH - 1)) / "leaf"
    assert leaf.read_text() == "x"


def test_too_many_entries_is_over_every_bound(tmp_path, monkeypatch):
    import worker.output_walk as walk
    monkeypatch.setattr(walk, "MAX_OUTPUT_ENTRIES", 50)
    (tmp_path / "out").mkdir()
    for i in range(60):
        (tmp_path / "out" / f"f{i}").touch()
    assert compute_usage(tmp_path / "out") == TOO_BIG


def test_remove_tree_deletes_any_depth_and_never_follows_links(tmp_path):
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "precious").write_text("kept")
    make_deep_tree(tmp_path / "work" / "output", 3_000)
    (tmp_path / "work" / "output" / "link").symlink_to(keep)
    remove_tree(tmp_path / "work")
    assert not (tmp_path / "work").exists()
    assert (keep / "precious").read_text() == "kept"


class DeepOutputExecutor(FakeExecutor):
    """Meta-train leaves a 1,500-level tree in /output (watchdog mode: the worker's folder)."""

    def __call__(self, request: ExecutionRequest, cancel: threading.Event) -> ExecutionResult:
        make_deep_tree(request.output_dir / "junk", 1_500)
        return ExecutionResult(exit_code=0, oom_killed=False, timed_out=False, wall_time_s=1.0,
                               stdout="", stderr="", output_exceeded=True)


def test_a_deep_output_tree_ends_in_the_participants_verdict_and_is_cleaned(fake_client,
                                                                           tmp_path):
    assert run(fake_client, tmp_path, DeepOutputExecutor()) is RunResult.PUBLISHED
    [body] = fake_client.named("finish")
    assert (body["state"], body["reason"]) == ("failed", "bad_predictions")
    assert fake_client.named("release") == []
    assert list((tmp_path / "runs").iterdir()) == []


def _serve_zip(fake_client, data: bytes) -> None:
    fake_client.submission = data
    fake_client.claimed = fake_client.claimed.model_copy(
        update={"submission_sha256": hashlib.sha256(data).hexdigest()})


@pytest.mark.parametrize("name", ["a" * 60_000 + ".py", "d/" * 4_000 + "x.py",
                                  ("n" * 250 + "/") * 20 + "x.py"])
def test_a_zip_name_extraction_cannot_write_is_an_invalid_submission(fake_client, tmp_path,
                                                                     name):
    _serve_zip(fake_client, make_zip({"model.py": "x = 1\n", name: "y"}))
    executor = FakeExecutor()
    assert run(fake_client, tmp_path, executor) is RunResult.PUBLISHED
    [body] = fake_client.named("finish")
    assert (body["state"], body["reason"]) == ("failed", "invalid_submission")
    assert "zip" in body["message"]
    assert fake_client.named("release") == [] and executor.requests == []


@pytest.mark.parametrize(("exc", "platform"), [
    (OSError(errno.ENOSPC, "No space left on device"), True),
    (OSError(errno.EIO, "Input/output error"), True),
    (OSError(errno.ENAMETOOLONG, "File name too long"), False),
    (OSError(errno.EILSEQ, "Illegal byte sequence"), False),
    (RecursionError("maximum recursion depth exceeded"), False),
    (UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"), False),
])
def test_platform_faults_are_a_closed_list(exc, platform):
    assert is_platform_fault(exc) is platform


@pytest.mark.parametrize("text", ["\ud800", "a\x00b", "\udfff tail \ud83d", "ok\x1b[2J\x07"])
def test_a_message_with_lone_surrogates_or_nul_is_sent_storable(server, text):  # noqa: F811
    url, script = server
    script.answers["/internal/runs/5/finish"] = [(200, b"{}")]
    body = {"fencing_token": 1, "state": "failed", "reason": "meta_fit_error",
            "message": text, "log": text, "summary": {text: [text]}, "tasks": []}
    assert make_client(url).finish(5, "tok", body) is True
    sent = json.loads(script.seen[0][3].decode("utf-8"))
    for value in (sent["message"], sent["log"], *sent["summary"], *sent["summary"].values()):
        flat = value if isinstance(value, str) else value[0]
        assert "\x00" not in flat and not any(0xD800 <= ord(c) <= 0xDFFF for c in flat)
    assert sent["message"].startswith(("\ufffd", "a", "ok"))
    if "\x1b" in text:
        assert sent["message"] == text  # other controls are storable: kept, escaped on display


def test_a_beat_refused_while_scoring_never_throws_the_result_away(fake_client, tmp_path):
    """D4: the background beat answered 409 after the verdict was decided; the worker used to
    return LOST and publish nothing, so a finished run was executed again minutes later."""
    from test_worker_evaluate import FakeRunner, PredictingExecutor

    class LateRefusal(FakeRunner):
        def score_output(self, output_dir, answers_dir, duration_s=None):
            fake_client.revoked = True  # the next background beat gets a 409
            pause = threading.Event()
            for _ in range(1_000):  # at most ~10 s for the background beat to come
                if fake_client.calls and fake_client.calls[-1] == ("heartbeat", "scoring"):
                    break
                pause.wait(0.01)
            return super().score_output(output_dir, answers_dir, duration_s)

    result = run(fake_client, tmp_path, PredictingExecutor(), LateRefusal())
    assert result is RunResult.PUBLISHED
    [body] = fake_client.named("finish")
    assert body["state"] == "finished"


def test_a_worker_whose_disk_is_full_claims_nothing_and_the_job_is_retried(fake_client,
                                                                          tmp_path):
    """A full worker disk failed every run it took (issue 21); now it does not claim, and the
    job raises the error its Celery task retries (re-published: another worker may take it)."""
    from test_worker_evaluate import FakeRunner, make_runtime

    from worker.client import ServerUnavailableError
    from worker.pipeline.evaluate import evaluate_run
    from worker.pipeline.faults import HostUnhealthyError

    runtime = make_runtime(fake_client, FakeExecutor(), FakeRunner(), tmp_path)
    full = dataclasses.replace(runtime, min_free_bytes=1 << 62)  # more than any disk has
    with pytest.raises(HostUnhealthyError) as caught:
        evaluate_run(7, "run-token-1", full)
    assert isinstance(caught.value, ServerUnavailableError)
    assert "claims no run" in str(caught.value)
    # No claim: only the report the workers page shows (a claim the server answers 409).
    assert fake_client.calls == [("report_unhealthy", str(caught.value))]
    assert evaluate_run(7, "run-token-1", runtime) is RunResult.PUBLISHED


def test_a_worker_whose_docker_engine_does_not_answer_claims_nothing_and_says_why(fake_client,
                                                                                  tmp_path):
    """Issue 21: an engine gone away failed every run the worker took (each released); now the
    Docker executor's ping runs before each claim, like the disk check."""
    from test_worker_evaluate import FakeRunner, make_runtime

    from worker.pipeline.evaluate import evaluate_run
    from worker.pipeline.faults import HostUnhealthyError

    engine_up = [False]

    def ping() -> None:
        if not engine_up[0]:
            raise ConnectionError("Error while fetching server API version: connection refused")

    runtime = dataclasses.replace(make_runtime(fake_client, FakeExecutor(), FakeRunner(),
                                               tmp_path), engine_check=ping)
    with pytest.raises(HostUnhealthyError) as caught:
        evaluate_run(7, "run-token-1", runtime)
    assert "cannot reach its Docker engine" in str(caught.value)
    assert "connection refused" in str(caught.value)
    assert fake_client.calls == [("report_unhealthy", str(caught.value))]
    engine_up[0] = True
    assert evaluate_run(7, "run-token-1", runtime) is RunResult.PUBLISHED


def test_the_unhealthy_report_is_a_withheld_claim_sent_once(server):  # noqa: F811
    url, script = server
    script.answers["/internal/runs/5/claim"] = [(409, b'{"error": {"code": "worker.unhealthy"}}')]
    make_client(url).report_unhealthy(5, "tok", "host/0", "disk full \ud800")
    [(method, _, auth, body)] = script.seen
    assert (method, auth) == ("POST", "Bearer tok")
    assert json.loads(body) == {"worker": "host/0", "unhealthy": "disk full \ufffd"}
