"""`arena phases|submit|status` against a real app (issue 14): the phases a participant can
submit to with their quota, a wrong phase or a spent quota refused before the upload, an
identical zip refused unless asked for, a status table with score ± CI and rank, and a wrong
token pointing at `arena login`."""

from __future__ import annotations

from datetime import timedelta

import pytest
import typer
from _server_support import zip_bytes
from typer.testing import CliRunner

from starting_kit.commands import remote
from starting_kit.commands.remote_client import ArenaClient


@pytest.fixture
def arena_cli(env, monkeypatch):
    """Run `arena …` with its HTTP going to the test app; returns (exit code, output)."""
    monkeypatch.setattr(ArenaClient, "connect",
                        classmethod(lambda cls, server, token, timeout_s=60.0:
                                    cls(env.client, token)))
    monkeypatch.setenv("COLUMNS", "200")
    app = typer.Typer()
    remote.register(app)

    def run(*args: str, token: str) -> tuple[int, str]:
        result = CliRunner().invoke(app, [*args, "--server", "http://testserver",
                                          "--token", token])
        return result.exit_code, result.output

    return run


def _token(headers: dict) -> str:
    return headers["Authorization"].split()[1]


def test_phases_lists_where_one_can_submit_with_quota_and_closing_time(env, arena_cli):
    now = env.clock.now
    _, headers = env.user("ann")
    open_id = env.phase(name="feedback", ends_at=now + timedelta(days=2, hours=3),
                        quota_per_day=5).id
    closed_id = env.phase(name="old [phase]", ends_at=now - timedelta(days=1)).id
    env.submit(open_id, headers)
    code, out = arena_cli("phases", token=_token(headers))
    assert code == 0, out
    assert "feedback" in out and "closes in 2 days 3 h" in out and "4 of 5 left today" in out
    assert "old [phase]" not in out
    code, out = arena_cli("phases", "--all", token=_token(headers))
    assert "old [phase]" in out  # brackets printed as typed, not eaten as markup
    assert str(closed_id) in out


def test_submit_to_a_closed_phase_is_refused_before_the_upload(env, arena_cli, tmp_path):
    _, headers = env.user("ann")
    closed_id = env.phase(ends_at=env.clock.now - timedelta(days=1)).id
    archive = tmp_path / "s.zip"
    archive.write_bytes(zip_bytes())
    code, out = arena_cli("submit", str(archive), "--phase", str(closed_id), "--no-wait",
                          token=_token(headers))
    assert code == 1 and "is closed" in out and "nothing was uploaded" in out
    assert "arena phases" in out
    code, out = arena_cli("submit", str(archive), "--phase", "999", "--no-wait",
                          token=_token(headers))
    assert code == 1 and "no phase 999" in out and env.queue.jobs == []


def test_an_identical_zip_is_refused_unless_asked_for_and_quota_is_reported(env, arena_cli,
                                                                           tmp_path):
    _, headers = env.user("ann")
    phase_id = env.phase(quota_total=3).id
    archive = tmp_path / "s.zip"
    archive.write_bytes(zip_bytes())
    code, out = arena_cli("submit", str(archive), "--phase", str(phase_id), "--no-wait",
                          token=_token(headers))
    assert code == 0 and "quota left: 2 of 3 in total" in out, out
    code, out = arena_cli("submit", str(archive), "--phase", str(phase_id), "--no-wait",
                          token=_token(headers))
    assert code == 1 and "identical to your submission" in out and "--allow-duplicate" in out
    code, out = arena_cli("submit", str(archive), "--phase", str(phase_id), "--no-wait",
                          "--allow-duplicate", token=_token(headers))
    assert code == 0 and "1 of 3 in total" in out


def test_status_prints_a_table_with_score_ci_and_rank(env, arena_cli):
    from test_pages import finish  # the run service, as a worker would finish

    _, headers = env.user("ann")
    phase_id = env.phase(name="feedback").id
    first = env.submit(phase_id, headers).json()["id"]
    env.submit(phase_id, headers)
    finish(env, first, score=0.5)
    code, out = arena_cli("status", token=_token(headers))
    assert code == 0, out
    assert "score ± 95% CI" in out and "rank" in out
    assert "1 of 1" in out and "queued" in out and "feedback" in out


def test_a_wrong_token_points_at_arena_login_not_at_the_api(env, arena_cli):
    code, out = arena_cli("status", token="not-a-token")
    assert code == 1
    assert "arena login --server" in out and "/api/v1/auth/token" not in out
