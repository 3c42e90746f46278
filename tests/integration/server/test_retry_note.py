"""A run put back in the queue after a platform fault reads as one, retried and not charged
(issue 32.5: in a secret phase its owner read "The run failed during meta-testing"), in the
API, on the submission page and in `arena status`."""

from __future__ import annotations

import pytest
import typer
from test_pages import login
from test_runs import call, claim
from typer.testing import CliRunner

from starting_kit.commands import remote
from starting_kit.commands.remote_client import ArenaClient

NOTE = "A platform fault; it will be retried, not charged to your quota"


def _released(env, **phase_fields) -> tuple[int, dict]:
    """A submission whose one run a worker claimed and released (a platform fault)."""
    phase = env.phase(**phase_fields)
    _, headers = env.user("ann")
    answer = env.submit(phase.id, headers)
    assert answer.status_code == 201, answer.text
    submission_id = answer.json()["id"]
    run_id, token = env.queue.jobs[-1][:2]
    fencing = claim(env, run_id, token, host_lock=True).json()["fencing_token"]
    released = call(env, run_id, token, "release",
                    {"fencing_token": fencing, "error": "the worker was stopped"})
    assert released.json()["requeued"], released.text
    return submission_id, headers


@pytest.mark.parametrize("test_data", ["public", "secret"])
def test_a_run_waiting_for_its_retry_reads_as_a_platform_fault(env, test_data):
    submission_id, headers = _released(env, leaderboard={"test_data": test_data})
    view = env.client.get(f"/api/v1/submissions/{submission_id}", headers=headers).json()
    [run] = view["runs"]
    assert run["state"] == "queued" and run["message"].startswith(NOTE), run
    assert "failed" not in run["message"]
    if test_data == "public":
        assert "the worker was stopped" in run["message"]  # the cause, platform text
    login(env, headers)
    page = env.client.get(f"/submissions/{submission_id}").text
    assert NOTE in page and "failed during meta-testing" not in page


def test_arena_status_says_the_run_will_be_retried(env, monkeypatch):
    submission_id, headers = _released(env, leaderboard={"test_data": "secret"})
    monkeypatch.setattr(ArenaClient, "connect",
                        classmethod(lambda cls, server, token, timeout_s=60.0:
                                    cls(env.client, token)))
    monkeypatch.setenv("COLUMNS", "300")
    app = typer.Typer()
    remote.register(app)
    result = CliRunner().invoke(app, ["status", str(submission_id), "--server", "http://x",
                                      "--token", headers["Authorization"].split()[1]])
    assert result.exit_code == 0, result.output
    assert f"run 0: queued: {NOTE}" in " ".join(result.output.split())


def test_arena_submit_following_a_run_says_it_is_retried_after_a_fault():
    from starting_kit.commands.remote_client import follow

    views = iter([
        {"state": "running", "runs": [{"state": "running", "message": None}]},
        {"state": "queued", "runs": [{"state": "queued", "message": f"{NOTE} (the fault: x)"}]},
        {"state": "finished", "runs": [{"state": "finished", "message": None}]}])

    class Client:
        def get(self, url: str) -> dict:
            return next(views)

    said: list[str] = []
    follow(Client(), 7, sleep=lambda s: None, say=said.append)  # type: ignore[arg-type]
    assert said[1] == f"submission 7: queued: {NOTE} (the fault: x)", said
