"""`arena submit` follows a submission without going silent (issue 14, item 4): each state
change is said, and a state that lasts is re-announced with how long it has lasted."""

from __future__ import annotations

from starting_kit.commands.remote_client import follow


class FakeClient:
    def __init__(self, states: list[str]) -> None:
        self.states = states

    def get(self, _url: str) -> dict:
        state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
        progress = {"step": "meta_test", "tasks_done": 37, "tasks_total": 200}
        return {"state": state, "queue_position": 2 if state == "queued" else None,
                "runs": [{"index": 0, "state": state, "progress": progress}]}


def test_follow_says_changes_and_reminds_during_a_long_state():
    now = [0.0]
    said: list[str] = []
    states = ["queued", "running", *["running"] * 30, "finished"]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    view = follow(FakeClient(states), 7, poll_s=5, sleep=sleep, say=said.append,
                  clock=lambda: now[0], remind_s=60)
    assert view["state"] == "finished"
    assert said[0] == "submission 7: queued (queue position 2)"
    assert said[1] == "submission 7: running"
    assert "submission 7: still running (1 min; meta-test 37 of 200 tasks)" in said
    assert "submission 7: still running (2 min; meta-test 37 of 200 tasks)" in said
    assert said[-1] == "submission 7: finished"
