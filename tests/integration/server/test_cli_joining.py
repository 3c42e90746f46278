"""`arena phases` lists only the phases the account may submit to, and says why the other open
ones are not theirs yet; `arena join --accept-terms` (issue 23 item 2)."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from server.models import Competition, Phase
from starting_kit.commands import participants, remote
from starting_kit.commands.remote_client import ArenaClient


@pytest.fixture
def arena_cli(env, monkeypatch):
    monkeypatch.setattr(ArenaClient, "connect",
                        classmethod(lambda cls, server, token, timeout_s=60.0:
                                    cls(env.client, token)))
    monkeypatch.setenv("COLUMNS", "200")
    app = typer.Typer()
    remote.register(app)
    participants.register(app)

    def run(*args: str, token: str) -> tuple[int, str]:
        result = CliRunner().invoke(app, [*args, "--server", "http://testserver",
                                          "--token", token])
        return result.exit_code, result.output

    return run


def competition(env, name: str, **fields) -> str:
    phase = env.phase(name=name)
    with env.db.session() as s:
        comp = s.get(Competition, s.get(Phase, phase.id).competition_id)
        for key, value in fields.items():
            setattr(comp, key, value)
        return comp.slug


def test_phases_shows_only_phases_one_may_submit_to_and_why_not_the_others(env, arena_cli):
    _, ann = env.user("ann")
    token = ann["Authorization"].split()[1]
    competition(env, "mine")
    with_terms = competition(env, "withterms", terms="Be nice.")
    approval = competition(env, "byapproval", participation="approval")
    code, out = arena_cli("phases", token=token)
    assert code == 0, out
    assert "mine" in out and "withterms" not in out.split("not yours yet")[0]
    assert f"arena join {with_terms} --accept-terms" in out
    assert f"it needs the organizers' approval; ask with `arena join {approval}`" in out
    code, out = arena_cli("join", with_terms, "--accept-terms", token=token)
    assert code == 0 and "approved" in out, out
    code, out = arena_cli("join", approval, token=token)
    assert "pending" in out
    code, out = arena_cli("phases", token=token)
    assert "withterms" in out.split("not yours yet")[0]
    assert "awaits the organizers' approval" in out
