"""What the CLI tells a participant (issue 24, trap 10): `arena logs` shows the traceback of a
`fit` crash that lives only in the run's message, `arena leaderboard --stats` says when the
phase shows no statistics instead of printing the plain board silently, and a 403 carries its
hint once."""

from __future__ import annotations

import httpx
from test_log_display import _finished_with_log
from typer.testing import CliRunner

from starting_kit.commands.remote_client import explain

TRACEBACK = ("fit failed on test task 3:\nTraceback (most recent call last):\n"
             "  File \"/submission/model.py\", line 40, in fit\nValueError: bad support set")


def _cli(env, monkeypatch):
    from starting_kit import cli as arena_cli
    from starting_kit.commands import remote_client

    monkeypatch.setattr(remote_client.ArenaClient, "connect",
                        classmethod(lambda cls, server, token, timeout_s=60.0:
                                    cls(env.client, token)))
    arena_cli._mount_plugins()

    def run(headers: dict, *args: str) -> tuple[int, str]:
        token = headers["Authorization"].removeprefix("Bearer ")
        result = CliRunner().invoke(arena_cli.app, [*args, "--server", "http://t", "--token",
                                                    token])
        return result.exit_code, result.output

    return run


def test_logs_show_a_fit_crash_traceback_kept_only_in_the_message(env, monkeypatch):
    cli = _cli(env, monkeypatch)
    submission_id, ann = _finished_with_log(env, "")
    with env.db.session() as s:
        from server.models import Run

        run = s.query(Run).one()
        run.message = TRACEBACK
    code, out = cli(ann, "logs", str(submission_id))
    assert code == 0, out
    assert "(the run wrote no log)" in out
    assert "ValueError: bad support set" in out and "why it failed" in out


def test_leaderboard_stats_says_when_statistics_are_off(env, monkeypatch):
    cli = _cli(env, monkeypatch)
    _, ann = env.user("ann")
    phase = env.phase(leaderboard={"statistics": "never"})
    code, out = cli(ann, "leaderboard", "--phase", str(phase.id), "--stats")
    assert code == 0, out
    assert "statistics (rank ranges, tied groups) are off" in " ".join(out.split())


def test_a_403_hint_is_said_once():
    request = httpx.Request("GET", "http://t/organizer")
    message = ("the organizer dashboard is for organizers; you are 'participant' — ask an admin "
               "if you should be one")
    answer = httpx.Response(403, request=request,
                            json={"error": {"code": "forbidden", "message": message}})
    text = explain(answer)
    assert text.count("ask") == 1, text
