"""`arena phase close|publish` (issue 20): an organizer closes a secret phase and publishes its
results from the command line (refused while its runs are pending); the owner's score appears
only then, the action is audited, and another competition's organizer can do neither."""

from __future__ import annotations

import typer
from test_cli_participant import _token
from typer.testing import CliRunner

from server.models import Submission
from starting_kit.commands import phases
from starting_kit.commands.remote_client import ArenaClient


def _cli(env, monkeypatch):
    monkeypatch.setattr(ArenaClient, "connect",
                        classmethod(lambda cls, server, token, timeout_s=60.0:
                                    cls(env.client, token)))
    app = typer.Typer()
    phases.register(app)
    app.command("noop")(lambda: None)  # a group needs two commands to keep its name

    def run(*args: str, token: str) -> tuple[int, str]:
        result = CliRunner().invoke(app, [*args, "--server", "http://testserver",
                                          "--token", token])
        return result.exit_code, result.output

    return run


def test_an_organizer_closes_and_publishes_a_secret_phase(env, monkeypatch):
    arena = _cli(env, monkeypatch)
    organizer, staff = env.user("olga", role="organizer")
    _, stranger = env.user("oscar", role="organizer")
    _, ann = env.user("ann")
    phase = env.phase(owner=organizer, leaderboard={"test_data": "secret"})
    submission_id = env.submit(phase.id, ann).json()["id"]
    with env.db.session() as s:  # scored as the worker would have
        s.get(Submission, submission_id).score = 0.61
    assert env.client.get(f"/api/v1/submissions/{submission_id}",
                          headers=ann).json()["score"] is None

    code, out = arena("phase", "publish", str(phase.id), token=_token(staff))
    assert code == 1 and "close it first" in out, out
    code, out = arena("phase", "close", str(phase.id), token=_token(stranger))
    assert code == 1 and "among those you organize" in out, out
    code, out = arena("phase", "close", str(phase.id), token=_token(staff))
    assert code == 0 and "closed" in out, out
    code, out = arena("phase", "publish", str(phase.id), token=_token(stranger))
    assert code == 1, out
    code, out = arena("phase", "publish", str(phase.id), token=_token(staff))
    assert code == 1 and "phase.runs_pending" in out and "1 queued" in out, out  # issue 32.3
    with env.db.session() as s:  # its run ended as the worker would have ended it
        s.get(Submission, submission_id).runs[0].state = "finished"
    code, out = arena("phase", "publish", str(phase.id), token=_token(staff))
    assert code == 0 and "published" in out, out

    assert env.client.get(f"/api/v1/submissions/{submission_id}",
                          headers=ann).json()["score"] == 0.61
    audit = env.client.get("/api/v1/admin/audit?action=phase.publish", headers=staff).json()
    assert [a["target"] for a in audit] == [f"phase:{phase.id}"]
