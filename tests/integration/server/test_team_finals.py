"""Teams through the final (issue 32 finding 2), through the real routes on SQLite and
Postgres: the team is the competitor, so closing a phase carries one entry per team, keeping its
team, method and league; the close summary tells every member the truth about the team's carry;
team-mates open and select each other's submissions while they are members, and a removed
member neither sees the team's new submissions nor chooses its entry (issue 33 item 7); the
board's CSV and `arena leaderboard` name the competitor and the method. Each test fails at
a55d28d (two final entries without team or method, "you were not carried" for a carried team's
member, 404 for a team-mate's submission, a removed member's select accepted, no team or method
column)."""

from __future__ import annotations

import csv
import io

from _server_support import zip_bytes
from test_cli_participant_words import _cli
from test_teams import create, finish, join, team_competition

from server.models import Competition, Phase


def _upload(env, phase_id: int, headers: dict, body: bytes, method: str) -> int:
    made = env.client.post(f"/api/v1/phases/{phase_id}/submissions", headers=headers,
                           files={"file": ("s.zip", zip_bytes([("model.py", body)]),
                                           "application/zip")},
                           data={"method": method})
    assert made.status_code == 201, made.text
    return made.json()["id"]


def _finished(env, phase_id: int, headers: dict, body: bytes, method: str,
              score: float) -> int:
    sid = _upload(env, phase_id, headers, body, method)
    run_id = env.client.get(f"/api/v1/submissions/{sid}", headers=headers).json()["runs"][0]["id"]
    finish(env, run_id, score)
    return sid


def _team_world(env):
    """A team competition organized by olga: Foxes (ann captain, bob) and cat alone, each with a
    finished submission in `dev`, and a final carrying from `dev`."""
    org, olga = env.user("olga", role="organizer")
    comp_id, phase_id = team_competition(env)
    with env.db.session() as s:
        s.get(Competition, comp_id).owner_id = org.id
        final = Phase(competition_id=comp_id, name="final", status="open",
                      runs_per_submission=1, carry_from_id=phase_id, created_at=env.clock.now)
        s.add(final)
        s.flush()
        final_id = final.id
    ann_user, ann = env.user("ann")
    bob_user, bob = env.user("bob")
    _, cat = env.user("cat")
    team = create(env, comp_id, ann).json()
    assert join(env, comp_id, bob, team["invite_code"]).status_code == 200
    subs = {"ann": _finished(env, phase_id, ann, b"# a\n", "ProtoNet", 0.5),
            "bob": _finished(env, phase_id, bob, b"# b\n", "MAML++", 0.7),
            "cat": _finished(env, phase_id, cat, b"# c\n", "=HYPERLINK(\"x\")", 0.6)}
    return {"olga": olga, "ann": ann, "bob": bob, "cat": cat, "comp_id": comp_id,
            "phase_id": phase_id, "final_id": final_id, "team_id": team["id"], "subs": subs,
            "ann_id": ann_user.id, "bob_id": bob_user.id}


def test_a_team_is_carried_once_with_its_name_and_method_and_every_member_is_told(env):
    w = _team_world(env)
    closed = env.client.post(f"/api/v1/phases/{w['phase_id']}/close", headers=w["olga"])
    assert closed.status_code == 200, closed.text
    carried = closed.json()["carried"][str(w["final_id"])]
    assert len(carried) == 2  # Foxes once (bob's better entry), cat once
    copies = [env.client.get(f"/api/v1/submissions/{sid}", headers=w["olga"]).json()
              for sid in carried]
    foxes = next(c for c in copies if c["team_id"] == w["team_id"])
    assert foxes["method_name"] == "MAML++" and foxes["note"].endswith(str(w["subs"]["bob"]))
    lines = {line["competitor"]: line for line in closed.json()["summary"]}
    assert set(lines) == {"Foxes", "cat"} and lines["Foxes"]["outcome"] == "carried"
    assert sorted(lines["Foxes"]["member_ids"]) == sorted([w["ann_id"], w["bob_id"]])
    for who in ("ann", "bob"):  # ann's own entry was not chosen: she is told the team's truth
        page = _web(env, w[who]).get("/my").text
        assert "your team Foxes" in page and "was carried into final" in page
        assert "not carried" not in page
    for copy in copies:
        run_id = copy["runs"][0]["id"]
        finish(env, run_id, 0.8 if copy["team_id"] else 0.4)
    board = env.client.get(f"/api/v1/phases/{w['final_id']}/leaderboard",
                           headers=w["olga"]).json()
    assert [(e["team"], e["username"], e["method"]) for e in board["entries"]] == [
        ("Foxes", "bob", "MAML++"), (None, "cat", "=HYPERLINK(\"x\")")]
    text = env.client.get(f"/api/v1/phases/{w['final_id']}/leaderboard?format=csv",
                          headers=w["olga"]).text
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(r["competitor"], r["competitor_kind"], r["username"], r["method"])
            for r in rows] == [("Foxes", "team", "bob", "MAML++"),
                               ("cat", "user", "cat", "'=HYPERLINK(\"x\")")]  # never a formula
    assert text.count("Foxes") == 1  # one entry, named once


def test_team_mates_open_and_select_each_others_submissions_until_removed(env):
    w = _team_world(env)
    ann, bob, subs = w["ann"], w["bob"], w["subs"]
    assert env.client.get(f"/api/v1/submissions/{subs['bob']}", headers=ann).status_code == 200
    assert env.client.get(f"/api/v1/submissions/{subs['cat']}", headers=ann).status_code == 404
    page = _web(env, ann).get(f"/submissions/{subs['bob']}").text
    assert "MAML++" in page and 'id="team">Foxes' in page and "Use for the leaderboard" in page
    chosen = env.client.post(f"/api/v1/submissions/{subs['ann']}/select", headers=bob)
    assert chosen.status_code == 200, chosen.text
    board = env.client.get(f"/api/v1/phases/{w['phase_id']}/leaderboard").json()
    foxes = [e["submission_id"] for e in board["entries"] if e["team"] == "Foxes"]
    assert foxes == [subs["ann"]]  # the team's choice, not bob's better score
    mine = _web(env, bob).get("/my").text  # bob's page lists the team's, marks its entry
    row = mine.split(f'href="/submissions/{subs["ann"]}"', 1)[1].split("</tr>", 1)[0]
    assert "by team-mate ann" in row and "on the leaderboard" in row
    removed = env.client.delete(f"/api/v1/teams/{w['team_id']}/members/{w['bob_id']}",
                                headers=ann)
    assert removed.status_code == 204, removed.text
    new = _finished(env, w["phase_id"], ann, b"# a2\n", "ProtoNet v2", 0.9)
    assert env.client.get(f"/api/v1/submissions/{new}", headers=bob).status_code == 404
    assert f'href="/submissions/{new}"' not in _web(env, bob).get("/my").text
    own_old = env.client.post(f"/api/v1/submissions/{subs['bob']}/select", headers=bob)
    assert own_old.status_code == 403, own_old.text
    assert own_old.json()["error"]["code"] == "team.not_member"
    assert env.client.post(f"/api/v1/submissions/{new}/select",
                           headers=bob).status_code == 404
    board = env.client.get(f"/api/v1/phases/{w['phase_id']}/leaderboard").json()
    foxes = [e["submission_id"] for e in board["entries"] if e["team"] == "Foxes"]
    assert foxes == [subs["ann"]]  # still the members' choice


def test_arena_leaderboard_names_the_team_and_the_method(env, monkeypatch):
    w = _team_world(env)
    cli = _cli(env, monkeypatch)
    monkeypatch.setenv("COLUMNS", "200")
    code, out = cli(w["cat"], "leaderboard", "--phase", str(w["phase_id"]))
    assert code == 0, out
    assert "competitor" in out and "method" in out
    assert "Foxes (team)" in out and "MAML++" in out


def _web(env, headers: dict):
    """A browser-like client logged in with the bearer token of `headers` (a session cookie)."""
    import re

    client = env.client.__class__(env.client.app, follow_redirects=False)
    nonce = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/login").text)
    answer = client.post("/login", data={"csrf_token": nonce.group(1),
                                         "token": headers["Authorization"].split()[1]})
    assert answer.status_code == 303, answer.text
    return client
