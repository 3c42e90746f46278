"""What the remote commands print as tables (`arena phases`, `arena status`) and the checks they
make before an upload, built from the JSON API's answers. Every cell is a `rich.text.Text`, so a
name or note holding `[brackets]` prints as typed and is never read as rich markup.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rich.table import Table
from rich.text import Text

from starting_kit.commands.remote_client import ArenaClient, RemoteError

STATE_STYLES = {"finished": "green", "failed": "red", "timed_out": "red", "cancelled": "dim",
                "queued": "yellow", "preparing": "yellow", "running": "yellow",
                "scoring": "yellow", "open": "green", "upcoming": "yellow", "closed": "dim"}


def _cell(value: Any, style: str = "") -> Text:
    return Text("—" if value is None or value == "" else str(value), style=style)


def _parse(when: str | None) -> datetime | None:
    if not when:
        return None
    value = datetime.fromisoformat(when.replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def duration_words(seconds: float) -> str:
    """`3 days 4 h`, `5 h 12 min`, `12 min` (the web pages' wording)."""
    seconds = int(max(0, seconds))
    days, hours, minutes = seconds // 86400, seconds % 86400 // 3600, seconds % 3600 // 60
    if days:
        return f"{days} day{'s' if days != 1 else ''}" + (f" {hours} h" if hours else "")
    if hours:
        return f"{hours} h" + (f" {minutes} min" if minutes else "")
    return f"{minutes} min" if minutes else "under a minute"


def quota_words(quota: dict[str, Any] | None, now: datetime | None = None) -> str:
    """`4 of 5 left today (resets in 2 h), 19 of 20 in total`, or `no quota`."""
    if not quota:
        return "—"
    now = now or datetime.now(UTC)
    parts = []
    if quota.get("per_day"):
        resets, left = _parse(quota.get("resets_at")), quota.get("resets_in_s")
        if left is None and resets is not None:
            left = (resets - now).total_seconds()
        when = f" (resets in {duration_words(left)})" if left is not None else ""
        parts.append(f"{quota['per_day']['left']} of {quota['per_day']['limit']} left today{when}")
    if quota.get("total"):
        parts.append(f"{quota['total']['left']} of {quota['total']['limit']} in total")
    if quota.get("in_flight"):
        parts.append(f"{quota['in_flight']['left']} of {quota['in_flight']['limit']} more at once")
    return ", ".join(parts) or "no quota"


def phase_timing(phase: dict[str, Any], now: datetime | None = None) -> str:
    """`closes in 3 days 4 h`, `opens in 2 h`, `closed 2022-10-01`, or `` (the countdown is
    the server's, so a wrong laptop clock does not move it)."""
    now = now or datetime.now(UTC)
    ends = _parse(phase.get("ends_at"))
    left = phase.get("countdown_s")
    if phase["status"] in ("upcoming", "open") and left is not None:
        verb = "opens" if phase["status"] == "upcoming" else "closes"
        return f"{verb} in {duration_words(left)}"
    if phase["status"] == "closed" and ends:
        return f"closed {ends:%Y-%m-%d}"
    return ""


def phases_table(competitions: list[dict[str, Any]], quotas: dict[int, dict[str, Any]],
                 show_all: bool = False) -> Table:
    """The phases a participant can submit to (all visible ones with `show_all`)."""
    table = Table(title="Phases you can submit to" if not show_all else "Phases")
    for column in ("phase id", "competition", "phase", "status", "when", "your quota"):
        table.add_column(column, justify="right" if column == "phase id" else "left")
    for comp in competitions:
        for phase in comp["phases"]:
            if not show_all and not phase.get("accepting_submissions"):
                continue
            final = " (final)" if phase.get("carry_from_id") else ""
            table.add_row(_cell(phase["id"]), _cell(comp["title"]),
                          _cell(phase["name"] + final),
                          _cell(phase["status"], STATE_STYLES.get(phase["status"], "")),
                          _cell(phase_timing(phase)), _cell(quota_words(quotas.get(phase["id"]))
                                                            if phase["id"] in quotas else None))
    return table


def status_table(submissions: list[dict[str, Any]], phase_names: dict[int, str],
                 boards: dict[int, dict[str, Any] | None]) -> Table:
    """Your submissions: id, phase, state (and why), score ± CI, rank, submitted; a phase
    whose board is None (hidden) shows no ranks."""
    table = Table(title="Your submissions")
    for column in ("id", "phase", "state", "score ± 95% CI", "rank", "submitted"):
        table.add_column(column, justify="right" if column in ("id", "rank") else "left")
    for view in submissions:
        board = boards.get(view["phase_id"]) or {}
        entry = next((e for e in board.get("entries", []) + board.get("pinned", [])
                      if e.get("submission_id") == view["id"]), None)
        score = "—" if view["score"] is None else f"{view['score']:.4f}"
        if entry is not None and entry.get("ci95") is not None:
            score += f" ± {entry['ci95']:.3f}"
        rank = f"{entry['rank']} of {board['total']}" if entry and entry.get("rank") else (
            "—" if view["state"] != "finished" else "not on board")
        state = view["state"] + (f" ({view['reason']})" if view.get("reason") else "")
        if view.get("disqualified_at"):
            state = f"disqualified ({view.get('disqualified_reason') or 'by the organizers'})"
        if view.get("queue_position"):
            state += f" #{view['queue_position']} in queue"
        submitted = _parse(view["created_at"])
        table.add_row(_cell(view["id"]),
                      _cell(f"{phase_names.get(view['phase_id'], '?')} ({view['phase_id']})"),
                      _cell(state, STATE_STYLES.get("failed" if view.get("disqualified_at")
                                                    else view["state"], "")), _cell(score),
                      _cell(rank), _cell(f"{submitted:%Y-%m-%d %H:%M}" if submitted else None))
    return table


def check_phase_accepts(client: ArenaClient, phase_id: int) -> dict[str, Any]:
    """The phase, if it takes an upload now; else a RemoteError saying why, before any byte of
    the zip is sent. Returns the phase (its `image` is what the import check reads)."""
    try:
        phase = client.get(f"/api/v1/phases/{phase_id}")
    except RemoteError as exc:
        if "404" in str(exc).split(":", 1)[0]:
            raise RemoteError(f"there is no phase {phase_id} you can see; `arena phases` lists "
                              "the ones you can submit to") from exc
        raise
    if not phase.get("accepting_submissions", True):
        why = ("a final phase: it takes no uploads (select your submission in the phase "
               "before it)") if phase.get("carry_from_id") else (
            f"{phase['status']} ({phase_timing(phase) or 'not open'})")
        raise RemoteError(f"phase {phase_id} ({phase['name']}) is {why}; nothing was "
                          "uploaded. `arena phases` lists the phases open now.")
    quota = client.get(f"/api/v1/phases/{phase_id}/quota")
    spent = [k for k in ("per_day", "total", "in_flight") if (quota.get(k) or {}).get("left") == 0]
    if spent:
        raise RemoteError(f"your {spent[0].replace('_', ' ')} quota in phase {phase_id} is spent "
                          f"({quota_words(quota)}); nothing was uploaded")
    return phase
