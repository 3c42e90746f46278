"""Participant output shown to people (issue 13 item 8): a run log with terminal escapes reaches
`arena logs` and the submission page as visible text, and a long log keeps its first lines and
its final traceback. Before: ESC, BEL and CR went to the terminal raw, and the server kept only
the tail of a long log (the sandbox only the head)."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from typer.testing import CliRunner

HOSTILE = ("start\n\x1b]0;you are owned\x07\x1b[2J\x1b[Hfake prompt $ "
           "\rHIDDEN behind a carriage return\n\x9b31mred\n")


def _finished_with_log(env, log: str) -> tuple[int, dict]:
    _, ann = env.user("ann")
    phase = env.phase()
    submission = env.submit(phase.id, ann).json()
    run_id, token, _ = env.queue.jobs[-1]
    auth = {"Authorization": f"Bearer {token}"}
    claimed = env.client.post(f"/internal/runs/{run_id}/claim", json={"worker": "w"},
                              headers=auth).json()
    done = env.client.post(f"/internal/runs/{run_id}/finish", headers=auth, json={
        "fencing_token": claimed["fencing_token"], "state": "failed",
        "reason": "meta_fit_error", "message": "boom", "log": log})
    assert done.status_code == 200, done.text
    return submission["id"], ann


def test_arena_logs_shows_escapes_instead_of_obeying_them(env, monkeypatch):
    from starting_kit import cli as arena_cli
    from starting_kit.commands import remote_client

    submission_id, ann = _finished_with_log(env, HOSTILE)
    monkeypatch.setattr(remote_client.ArenaClient, "connect",
                        classmethod(lambda cls, server, token, timeout_s=60.0:
                                    cls(env.client, token)))
    arena_cli._mount_plugins()
    token = ann["Authorization"].removeprefix("Bearer ")
    result = CliRunner().invoke(arena_cli.app, ["logs", str(submission_id), "--server", "http://t",
                                                "--token", token])
    assert result.exit_code == 0, result.output
    assert not re.search("[\x1b\x07\r\x9b]", result.output), repr(result.output)
    assert "\\x1b]0;you are owned\\x07" in result.output
    assert "\nHIDDEN behind a carriage return" in result.output


def test_the_submission_page_shows_escapes_instead_of_raw_controls(env):
    submission_id, ann = _finished_with_log(env, HOSTILE)
    browser = TestClient(env.client.app, follow_redirects=False)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', browser.get("/login").text).group(1)
    browser.post("/login", data={"csrf_token": csrf,
                                 "token": ann["Authorization"].removeprefix("Bearer ")})
    page = browser.get(f"/submissions/{submission_id}").text
    assert not re.search("[\x1b\x07\x9b]", page), "raw controls elsewhere on the page"
    log = page[page.index('<pre class="log"'):]
    log = log[:log.index("</pre>")]
    assert not re.search("[\x1b\x07\r\x9b]", log), repr(log)
    assert "\\x1b[2J" in log and "HIDDEN behind a carriage return" in log


def test_a_long_log_keeps_its_first_lines_and_its_final_traceback(env):
    cap = env.settings.log_cap_bytes
    log = "CONFIG: seed 7, 5-way\n" + ("step ok\n" * (cap // 4)) + "Traceback: ValueError\n"
    submission_id, ann = _finished_with_log(env, log)
    runs = env.client.get(f"/api/v1/submissions/{submission_id}/logs", headers=ann).json()["runs"]
    stored = runs[0]["log"]
    assert stored.startswith("CONFIG: seed 7") and stored.endswith("Traceback: ValueError\n")
    assert "bytes cut here" in stored and len(stored.encode()) < cap + 200
