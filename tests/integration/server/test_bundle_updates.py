"""Bundle updates change nothing the file does not say (issue 24, trap 1): re-applying a bundle
to change a leaderboard setting leaves a closed phase closed (status changes only through the
phase's own actions or an explicit `status:`), `arena competition update` prints what will
change and asks first (`--yes` for scripts), and the API answers the same list as a dry run."""

from __future__ import annotations

import typer
from sqlalchemy import select
from test_cli_participant import _token
from typer.testing import CliRunner

from server.models import AuditLog
from starting_kit.commands import remote
from starting_kit.commands.remote_client import ArenaClient

BUNDLE = """slug: two-phases
title: Two phases
phases:
  - name: feedback
    starts_at: 2030-01-01T00:00:00Z
    ends_at: 2030-02-01T00:00:00Z
    leaderboard: {statistics: never}
  - name: final
    starts_at: 2030-02-01T00:00:00Z
    ends_at: 2030-03-01T00:00:00Z
    carry_from: feedback
"""


def _cli(env, monkeypatch):
    monkeypatch.setattr(ArenaClient, "connect",
                        classmethod(lambda cls, server, token, timeout_s=60.0:
                                    cls(env.client, token)))
    monkeypatch.setenv("COLUMNS", "200")
    app = typer.Typer()
    remote.register(app)

    def run(*args: str, token: str, answer: str = "") -> tuple[int, str]:
        result = CliRunner().invoke(app, [*args, "--server", "http://testserver", "--token",
                                          token], input=answer)
        return result.exit_code, result.output

    return run


def _phases(env) -> dict[str, dict]:
    return {p["name"]: p for p in env.client.get("/api/v1/phases").json()}


def _created_and_closed(env, monkeypatch, tmp_path):
    _, headers = env.user("olga", role="organizer")
    token, cli = _token(headers), _cli(env, monkeypatch)
    path = tmp_path / "competition.yaml"
    path.write_text(BUNDLE)
    code, out = cli("competition", "create", str(path), token=token)
    assert code == 0, out
    feedback = _phases(env)["feedback"]["id"]
    assert env.client.post(f"/api/v1/phases/{feedback}/close", headers=headers).status_code == 200
    return cli, token, headers, path, feedback


def test_reapplying_a_bundle_keeps_a_closed_phase_closed_and_lists_only_what_changes(
        env, monkeypatch, tmp_path):
    cli, token, _headers, path, feedback = _created_and_closed(env, monkeypatch, tmp_path)
    path.write_text(BUNDLE.replace("statistics: never", "statistics: after_close"))
    code, out = cli("competition", "update", str(path), "--yes", token=token)
    assert code == 0, out
    flat = " ".join(out.split())
    assert "this update changes 1 thing(s)" in flat, out
    assert "phase feedback: leaderboard.statistics: never → after_close" in flat, out
    assert "status" not in flat.split("competition two-phases")[0], out
    phases = _phases(env)
    assert phases["feedback"]["status"] == "closed"
    assert not phases["feedback"]["accepting_submissions"]
    _, ann = env.user("ann")
    refused = env.submit(feedback, ann)
    assert refused.status_code == 409, refused.text
    with env.db.session() as s:
        entry = s.execute(select(AuditLog).where(
            AuditLog.action == "competition.bundle.update")).scalar_one()
        assert [(c["phase"], c["field"]) for c in entry.details["changes"]] == [
            ("feedback", "leaderboard.statistics")]


def test_update_asks_before_applying_and_a_no_changes_nothing(env, monkeypatch, tmp_path):
    cli, token, _headers, path, _feedback = _created_and_closed(env, monkeypatch, tmp_path)
    path.write_text(BUNDLE.replace("title: Two phases", "title: Renamed"))
    code, out = cli("competition", "update", str(path), token=token, answer="n\n")
    assert "competition: title: Two phases → Renamed" in out and "apply these changes?" in out
    assert "nothing was changed" in out, out
    assert env.client.get("/api/v1/competitions/two-phases").json()["title"] == "Two phases"
    code, out = cli("competition", "update", str(path), token=token, answer="y\n")
    assert code == 0, out
    assert env.client.get("/api/v1/competitions/two-phases").json()["title"] == "Renamed"
    code, out = cli("competition", "update", str(path), token=token)
    assert code == 0 and "the bundle changes nothing" in out, out


def test_the_dry_run_lists_an_explicit_status_and_writes_nothing(env, monkeypatch, tmp_path):
    _cli_run, _token_, headers, _path, _feedback = _created_and_closed(env, monkeypatch,
                                                                      tmp_path)
    text = BUNDLE.replace("    leaderboard:", "    status: open\n    leaderboard:")
    answer = env.client.post("/api/v1/competitions/two-phases/bundle/diff", headers=headers,
                             content=text)
    assert answer.status_code == 200, answer.text
    diff = answer.json()
    assert [(c["phase"], c["field"], c["old"], c["new"]) for c in diff["changes"]] == [
        ("feedback", "status", "closed", "open")]
    assert _phases(env)["feedback"]["status"] == "closed"
