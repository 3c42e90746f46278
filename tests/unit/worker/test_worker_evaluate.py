"""Evaluate: one run end to end with a fake server, a fake executor and fake runner functions."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from worker_fakes import RUN_TOKEN, FakeClient, make_zip

from submission_api.runner.scorer import ParticipantFailure, ScoredRun
from worker.client import ServerUnavailableError
from worker.pipeline.errors import PlatformFault
from worker.pipeline.evaluate import RunResult, Runtime, evaluate_run
from worker.pipeline.execute import ExecutionRequest, ExecutionResult

WAIT_S = 10.0  # an upper bound for the heartbeat thread to act, never a timing assertion


@dataclass
class FakeExecutor:
    """Returns a set result; may write status.json, raise, or wait to be cancelled."""

    result: ExecutionResult = field(default_factory=lambda: ExecutionResult(
        exit_code=0, oom_killed=False, timed_out=False, wall_time_s=3.0, stdout="out",
        stderr=""))
    status: dict[str, Any] | None = None
    error: Exception | None = None
    revoke: FakeClient | None = None
    requests: list[ExecutionRequest] = field(default_factory=list)
    cancelled: bool = False

    def __call__(self, request: ExecutionRequest, cancel: threading.Event) -> ExecutionResult:
        self.requests.append(request)
        assert (request.submission_dir / "model.py").is_file()
        assert (request.bundle_dir / "run.json").is_file()
        if self.status is not None:
            (request.output_dir / "status.json").write_text(json.dumps(self.status))
        if self.error is not None:
            raise self.error
        if self.revoke is not None:
            self.revoke.revoked = True
            self.cancelled = cancel.wait(WAIT_S)
        return self.result


@dataclass
class FakeRunner:
    """Stands in for the runner's prepare_run and score_output; records their arguments."""

    prepared: list[tuple[Any, ...]] = field(default_factory=list)
    prepare_error: Exception | None = None

    def prepare_run(self, collection: Any, protocol: Any, seed: tuple[int, int],
                    bundle_dir: Path, answers_dir: Path, threads: int) -> None:
        if self.prepare_error is not None:
            raise self.prepare_error
        self.prepared.append((collection, protocol, seed, threads))
        bundle_dir.mkdir(parents=True)
        answers_dir.mkdir(parents=True)
        (bundle_dir / "run.json").write_text("{}")

    def score_output(self, output_dir: Path, answers_dir: Path,
                     duration_s: float | None = None) -> ScoredRun:
        if not (output_dir / "predictions").is_dir():
            raise ParticipantFailure("bad_predictions", "task 0: no readable predictions file")
        return ScoredRun(summary={"mean": 0.75}, records=[])


def make_runtime(client: FakeClient, executor: FakeExecutor, runner: FakeRunner,
                 tmp_path: Path, parse_protocol: Any = dict) -> Runtime:
    return Runtime(client=client, execute=executor, prepare_run=runner.prepare_run,
                   parse_protocol=parse_protocol, score_output=runner.score_output,
                   worker_name="host/0", cache_dir=tmp_path / "cache", runs_dir=tmp_path / "runs",
                   heartbeat_interval_s=0.01)


def run(client: FakeClient, tmp_path: Path, executor: FakeExecutor | None = None,
        runner: FakeRunner | None = None, **kwargs: Any) -> RunResult:
    runtime = make_runtime(client, executor or FakeExecutor(), runner or FakeRunner(), tmp_path,
                           **kwargs)
    return evaluate_run(7, RUN_TOKEN, runtime)


class PredictingExecutor(FakeExecutor):
    def __call__(self, request: ExecutionRequest, cancel: threading.Event) -> ExecutionResult:
        (request.output_dir / "predictions").mkdir()
        return super().__call__(request, cancel)


def test_run_claimed_elsewhere_or_finished_ends_quietly(fake_client, tmp_path):
    fake_client.claimed = None
    assert run(fake_client, tmp_path) is RunResult.NOT_CLAIMED
    assert [name for name, _ in fake_client.calls] == ["claim"]


def test_unreachable_server_at_claim_raises_for_the_job_to_retry(fake_client, tmp_path):
    def claim(*args: Any) -> None:
        raise ServerUnavailableError("down")
    fake_client.claim = claim
    with pytest.raises(ServerUnavailableError):
        run(fake_client, tmp_path)


def test_successful_run_is_prepared_executed_scored_and_published(fake_client, tmp_path):
    runner, executor = FakeRunner(), PredictingExecutor()
    assert run(fake_client, tmp_path, executor, runner) is RunResult.PUBLISHED
    collection, protocol, seed, threads = runner.prepared[0]
    assert collection.splits == {"meta-train": ["train_ds"], "meta-test": ["test_ds"]}
    assert sorted(collection.datasets) == ["test_ds", "train_ds"]
    assert (protocol, seed, threads) == ({"name": "fixed"}, (11, 2), 2)
    [body] = fake_client.named("finish")
    assert (body["state"], body["fencing_token"]) == ("finished", 3)
    assert body["summary"] == {"mean": 0.75}
    assert {"running", "scoring"} <= set(fake_client.named("heartbeat"))
    assert fake_client.named("release") == []
    assert list((tmp_path / "runs").iterdir()) == []  # scratch removed, cache kept
    assert (tmp_path / "cache" / "datasets").is_dir()


@pytest.mark.parametrize(("result", "status", "state", "reason"), [
    ({"exit_code": 1}, {"stage": "meta_fit", "error": "boom", "traceback": "Traceback: boom"},
     "failed", "meta_fit_error"),
    ({"exit_code": 137, "oom_killed": True}, None, "failed", "out_of_memory"),
    ({"exit_code": 137, "timed_out": True}, None, "timed_out", "time_limit"),
    ({"exit_code": 0}, {"stage": "done"}, "failed", "bad_predictions"),
])
def test_participant_failures_are_published_with_state_and_reason(fake_client, tmp_path, result,
                                                                  status, state, reason):
    base = FakeExecutor().result
    executor = FakeExecutor(result=ExecutionResult(**{**base.__dict__, **result}), status=status)
    assert run(fake_client, tmp_path, executor) is RunResult.PUBLISHED
    [body] = fake_client.named("finish")
    assert (body["state"], body["reason"]) == (state, reason)
    if status and status.get("traceback"):
        assert "Traceback: boom" in body["message"]


def test_unsafe_zip_fails_as_invalid_submission_without_running(fake_client, tmp_path):
    import hashlib

    bad = make_zip({"/etc/evil.py": "x", "model.py": "y"})
    fake_client.submission = bad
    fake_client.claimed = fake_client.claimed.model_copy(
        update={"submission_sha256": hashlib.sha256(bad).hexdigest()})
    executor = FakeExecutor()
    assert run(fake_client, tmp_path, executor) is RunResult.PUBLISHED
    assert fake_client.named("finish")[0]["reason"] == "invalid_submission"
    assert executor.requests == []


@pytest.mark.parametrize("make_fault", [
    lambda client, executor, runner: setattr(executor, "error", PlatformFault("engine gone")),
    lambda client, executor, runner: setattr(client, "fail_downloads", True),
    lambda client, executor, runner: setattr(runner, "prepare_error", OSError(28, "No space")),
])
def test_platform_faults_release_the_run_and_never_finish_it(fake_client, tmp_path, make_fault):
    executor, runner = FakeExecutor(), FakeRunner()
    make_fault(fake_client, executor, runner)
    assert run(fake_client, tmp_path, executor, runner) is RunResult.RELEASED
    assert fake_client.named("finish") == []
    assert len(fake_client.named("release")) == 1
    assert list((tmp_path / "runs").iterdir()) == []


def test_release_that_cannot_reach_the_server_ends_the_job_without_raising(fake_client, tmp_path):
    fake_client.release_fails = True
    executor = FakeExecutor(error=PlatformFault("engine gone"))
    assert run(fake_client, tmp_path, executor) is RunResult.UNREACHABLE


def test_lost_lease_cancels_the_execution_and_publishes_nothing(fake_client, tmp_path):
    executor = FakeExecutor(revoke=fake_client)
    assert run(fake_client, tmp_path, executor) is RunResult.LOST
    assert executor.cancelled
    assert fake_client.named("finish") == [] and fake_client.named("release") == []


def test_finish_refused_for_a_stale_token_is_reported_as_fenced(fake_client, tmp_path):
    fake_client.finish_answer = False
    assert run(fake_client, tmp_path, PredictingExecutor()) is RunResult.FENCED


def test_claimed_run_is_announced_as_this_worker_slot(fake_client, tmp_path):
    run(fake_client, tmp_path, PredictingExecutor())
    assert fake_client.named("claim") == ["host/0"]


def test_a_phase_its_datasets_cannot_serve_fails_at_once_uncharged(fake_client, tmp_path):
    runner = FakeRunner(prepare_error=ValueError("Dataset 'd' has 0 classes able to give 1 shot"))
    assert run(fake_client, tmp_path, runner=runner) is RunResult.PUBLISHED
    [body] = fake_client.named("finish")
    assert (body["state"], body["reason"]) == ("failed", "platform_error")
    assert "0 classes able" in body["message"] and "Organizers" in body["message"]
    assert fake_client.named("release") == []  # not retried: it cannot succeed


@pytest.mark.parametrize("exit_code", [0, 1])
@pytest.mark.parametrize("status", [
    {"stage": ["x"], "error": "e"},  # issue 13 (3b): crashed the scorer, retried as a fault
    {"stage": "meta_fit", "error": {"a": 1}},
    {"stage": "fit", "task": "3"},
    {"stage": "predict", "error": "e", "task": True},
])
def test_a_malformed_status_json_is_the_participants_outcome_never_a_retry(
        fake_client, tmp_path, exit_code, status):
    from submission_api.runner.scorer import score_output

    base = FakeExecutor().result
    executor = PredictingExecutor(result=ExecutionResult(**{**base.__dict__,
                                                            "exit_code": exit_code}),
                                  status=status)  # type: ignore[arg-type]
    runner = FakeRunner()
    runner.score_output = score_output  # type: ignore[method-assign] - the real scorer
    assert run(fake_client, tmp_path, executor, runner) is RunResult.PUBLISHED
    [body] = fake_client.named("finish")
    assert (body["state"], body["reason"]) == ("failed", "bad_predictions")
    assert "status.json" in body["message"]
    assert fake_client.named("release") == []


def test_an_unforeseen_bug_ends_the_run_uncharged_at_once_without_a_retry(fake_client, tmp_path):
    runner = FakeRunner(prepare_error=KeyError("bug"))
    assert run(fake_client, tmp_path, runner=runner) is RunResult.PUBLISHED
    [body] = fake_client.named("finish")
    assert (body["state"], body["reason"]) == ("failed", "platform_error")
    assert "KeyError" not in body["message"] and "not charged" in body["message"]
    assert fake_client.named("release") == []


def test_a_released_run_carries_the_short_cause_not_the_details(fake_client, tmp_path):
    fault = PlatformFault("sandbox platform error: http+docker://localhost/v1.41/... "
                          "scripts/ensure_docker.sh")
    fault.short_cause = "the sandbox image 'x:1' is not installed on worker 'host/0'"
    assert run(fake_client, tmp_path, FakeExecutor(error=fault)) is RunResult.RELEASED
    assert fake_client.named("release") == ["the sandbox image 'x:1' is not installed on worker "
                                            "'host/0'"]
    assert fake_client.release_details == [f"PlatformFault: {fault}"]  # for operators only
