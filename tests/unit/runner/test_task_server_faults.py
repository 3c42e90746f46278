"""The trusted side's own failures during meta-test: a run whose test tasks the platform cannot
read or cut ends at once as the platform's (`platform_error`, never charged), not as the
participant's crash, and never waits for the run's time limit (the supervisor once kept waiting
on the control socket of a task-server thread that had died). A task cut ahead, while the one
before it runs, is cut once; a failure to cut it ahead is not charged to the running task, and
it is cut again at its own turn."""

from __future__ import annotations

from pathlib import Path

import pytest

from submission_api.protocols import ProtocolParams
from submission_api.runner import task_server
from submission_api.runner.local import run_local
from submission_api.runner.task_payloads import Payloads

RANDOM_BASELINE = Path(__file__).resolve().parents[3] / "starting_kit" / "baselines" / "random"
TWO_TASKS = ProtocolParams.from_dict({"name": "cross-domain", "tasks_per_dataset": 2})
TIME_LIMIT_S = 600.0
"""Far beyond the run's few seconds: only a verdict reached at once is not `timed_out`."""


def test_images_the_platform_cannot_cut_end_the_run_at_once_as_a_platform_error(
        tmp_path: Path, tiny_collection: Path, arena_cache: Path,
        monkeypatch: pytest.MonkeyPatch):
    cut = Payloads._cut

    def failing_cut(self: Payloads, task: task_server.AnswerTask):  # noqa: ANN202
        if task.id == 1:  # cut ahead while task 0 runs, then again at its own turn
            raise OSError(5, "Input/output error", "images.u8")
        return cut(self, task)

    monkeypatch.setattr(Payloads, "_cut", failing_cut)
    result = run_local(RANDOM_BASELINE, tiny_collection, tmp_path / "out", protocol=TWO_TASKS,
                       cache_dir=arena_cache, time_limit_s=TIME_LIMIT_S)

    assert (result.state, result.reason) == ("failed", "platform_error"), result.message
    assert "could not prepare the images of test task 1" in str(result.message)
    assert "Input/output error" in str(result.message)


def test_test_tasks_the_platform_cannot_open_end_the_run_at_once_as_a_platform_error(
        tmp_path: Path, tiny_collection: Path, arena_cache: Path,
        monkeypatch: pytest.MonkeyPatch):
    def failing_open(plan: object) -> None:
        raise FileNotFoundError(2, "No such file or directory", "manifest.json")

    monkeypatch.setattr(task_server, "TaskImages", failing_open)
    result = run_local(RANDOM_BASELINE, tiny_collection, tmp_path / "out", protocol=TWO_TASKS,
                       cache_dir=arena_cache, time_limit_s=TIME_LIMIT_S)

    assert (result.state, result.reason) == ("failed", "platform_error"), result.message
    assert "could not open the run's test tasks" in str(result.message)


def counting_cuts(monkeypatch: pytest.MonkeyPatch, fail_first: set[int]) -> list[int]:
    """Patch the server's cut (a task's images read, or taken from the row cache, and
    converted into its file) to record each task id it cuts; the first cut of each task in
    `fail_first` fails."""
    cut, calls = Payloads._cut, []

    def recorded(self: Payloads, task: task_server.AnswerTask):  # noqa: ANN202
        calls.append(task.id)
        if task.id in fail_first and calls.count(task.id) == 1:
            raise OSError(5, "Input/output error", "images.u8")
        return cut(self, task)

    monkeypatch.setattr(Payloads, "_cut", recorded)
    return calls


def test_every_task_is_cut_once_the_next_while_the_current_runs(
        tmp_path: Path, tiny_collection: Path, arena_cache: Path,
        monkeypatch: pytest.MonkeyPatch):
    calls = counting_cuts(monkeypatch, fail_first=set())
    result = run_local(RANDOM_BASELINE, tiny_collection, tmp_path / "out", protocol=TWO_TASKS,
                       cache_dir=arena_cache, time_limit_s=TIME_LIMIT_S)

    assert result.state == "finished" and result.scores is not None, result.message
    assert calls == list(range(len(result.scores["tasks"])))


def test_a_failed_cut_ahead_is_not_charged_and_is_made_again_at_its_turn(
        tmp_path: Path, tiny_collection: Path, arena_cache: Path,
        monkeypatch: pytest.MonkeyPatch):
    calls = counting_cuts(monkeypatch, fail_first={1})
    result = run_local(RANDOM_BASELINE, tiny_collection, tmp_path / "out", protocol=TWO_TASKS,
                       cache_dir=arena_cache, time_limit_s=TIME_LIMIT_S)

    assert result.state == "finished", result.message
    assert calls[:3] == [0, 1, 1]  # ahead (failed, while task 0 ran), then at its own turn
