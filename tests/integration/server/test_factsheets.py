"""Fact sheets (issue 23 item 4): a phase's questions from its bundle fields, answered through
the API, the web form and `arena factsheet PHASE answers.yaml`, checked against the questions;
organizers export answers (JSON, CSV) with who has not answered; no one else does."""

from __future__ import annotations

import re

import typer
from test_pages import login
from typer.testing import CliRunner

from server.models import Phase
from starting_kit.commands import factsheet
from starting_kit.commands.remote_client import ArenaClient

QUESTIONS = [
    {"key": "approach", "label": "Describe your method", "kind": "text", "required": True,
     "choices": []},
    {"key": "pretrained", "label": "Pre-trained weights?", "kind": "choice", "required": False,
     "choices": ["yes", "no"]},
    {"key": "gpus", "label": "GPUs used", "kind": "number", "required": False, "choices": []},
    {"key": "paper", "label": "Paper", "kind": "url", "required": False, "choices": []},
]


def phase_with_factsheet(env) -> int:
    phase = env.phase()
    with env.db.session() as s:
        s.get(Phase, phase.id).factsheet = QUESTIONS
    return phase.id


def test_answers_are_checked_saved_and_exported_with_who_is_missing(env):
    phase_id = phase_with_factsheet(env)
    _, ann = env.user("ann")
    _, bob = env.user("bob")
    _, organizer = env.user("olga", role="organizer")
    env.submit(phase_id, ann)
    env.submit(phase_id, bob)
    url = f"/api/v1/phases/{phase_id}/factsheet"
    bad = env.client.put(url, headers=ann, json={"answers": {
        "pretrained": "maybe", "gpus": "many", "paper": "ftp://x", "extra": 1}})
    assert bad.status_code == 422
    message = bad.json()["error"]["message"]
    for problem in ("'approach'", "'pretrained' wants one of", "'gpus' wants a number",
                    "'paper' wants an http(s) URL", "'extra' is not a question"):
        assert problem in message, problem
    good = env.client.put(url, headers=ann, json={"answers": {
        "approach": "ProtoNet", "pretrained": "no", "gpus": "1"}})
    assert good.status_code == 200 and good.json()["answers"]["gpus"] == 1.0
    assert env.client.get(url, headers=ann).json()["answers"]["approach"] == "ProtoNet"
    export = f"{url}/answers"
    assert env.client.get(export, headers=ann).status_code == 403
    with env.db.session() as s:  # olga organizes this competition; another organizer does not
        s.get(Phase, phase_id).competition.owner_id = env.client.get(
            "/api/v1/me", headers=organizer).json()["id"]
    _, stranger = env.user("oscar", role="organizer")
    assert env.client.get(export, headers=stranger).status_code == 404
    data = env.client.get(export, headers=organizer).json()
    assert [a["username"] for a in data["answers"]] == ["ann"]
    assert [m["username"] for m in data["missing"]] == ["bob"]
    csv_text = env.client.get(export, headers=organizer, params={"format": "csv"}).text
    assert csv_text.splitlines()[0] == "username,user_id,answered,updated_at,approach," \
                                       "pretrained,gpus,paper"
    assert csv_text.splitlines()[2].startswith("bob,") and ",no," in csv_text
    # The organizer's dashboard links both exports; the links work with the web session.
    login(env, organizer)
    dashboard = env.client.get("/organizer").text
    assert f'href="{export}?format=csv"' in dashboard and f'href="{export}"' in dashboard
    assert env.client.get(f"{export}?format=csv").text == csv_text


def test_the_web_form_and_the_cli_answer_the_fact_sheet(env, monkeypatch, tmp_path):
    phase_id = phase_with_factsheet(env)
    _, ann = env.user("ann")
    token = ann["Authorization"].split()[1]
    login = env.client.get("/login").text
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', login).group(1)
    env.client.post("/login", data={"csrf_token": csrf, "token": token})
    page = env.client.get(f"/phases/{phase_id}/factsheet").text
    assert "Describe your method" in page and '<option value="yes"' in page
    csrf = re.search(r'action="/phases/\d+/factsheet">\s*<input type="hidden" '
                     r'name="csrf_token" value="([^"]+)"', page).group(1)
    saved = env.client.post(f"/phases/{phase_id}/factsheet",
                            data={"csrf_token": csrf, "q-approach": "MAML", "q-pretrained": "yes"})
    assert saved.status_code == 200 and "Your answers are saved" in saved.text
    monkeypatch.setattr(ArenaClient, "connect", classmethod(
        lambda cls, server, token, timeout_s=60.0: cls(env.client, token)))
    app = typer.Typer()
    factsheet.register(app)
    answers = tmp_path / "answers.yaml"
    answers.write_text("approach: |\n  Prototypes, then fine-tuning.\ngpus: 2\n")
    result = CliRunner().invoke(app, ["factsheet", str(phase_id), str(answers),
                                      "--server", "http://testserver", "--token", token])
    assert result.exit_code == 0 and "2 answers" in result.output, result.output
    template = CliRunner().invoke(app, ["factsheet", str(phase_id), "--server",
                                        "http://testserver", "--token", token])
    assert "# Describe your method (text) — required" in template.output
    assert "Prototypes, then fine-tuning." in template.output
