"""The detailed-results page of one run, rendered by `submission_api.report` from what the
worker published (the run summary and its per-task rows), and sent inline.

The page is the same self-contained HTML that `arena run` writes on a laptop: plots are PNG
data URIs, styles inline. It is sent with a CSP that allows nothing else (no script, no fetch),
since dataset names and notes inside it come from other people.
"""

from __future__ import annotations

import math

from fastapi.responses import HTMLResponse
from sqlalchemy.orm import object_session

from server.models import Phase, Run, Submission
from server.services.leaderboard import compute_leaderboard
from server.services.secrecy import board_hidden
from submission_api.report import render_detailed_results
from submission_api.scoring.records import TaskRecord

REPORT_CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; "
              "form-action 'none'; frame-ancestors 'self'")


def run_records(run: Run) -> list[TaskRecord]:
    """The run's stored task rows as scoring records (worst-class accuracy is not stored)."""
    return [TaskRecord(id=t.task_id, dataset=t.dataset, group=t.group, n_ways=t.n_ways,
                       n_shots=t.n_shots, score=t.score,
                       accuracy=math.nan if t.accuracy is None else t.accuracy,
                       worst_class_accuracy=math.nan)
            for t in run.tasks]


def id_vs_ood_points(submission: Submission, phase: Phase) -> list[tuple[str, float, float]]:
    """(label, BaseGen, NovelGen) of the phase's leaderboard entries for the id-ood scatter, this
    submission labelled "this submission"; only it when the phase hides its leaderboard."""
    if (phase.protocol or {}).get("name") != "id-ood":
        return []
    session = object_session(submission)
    entries = compute_leaderboard(session, phase) if session is not None else []
    hidden = board_hidden(phase) != "none"
    points = []
    for e in entries:
        mine = e.submission_id == submission.id
        if (mine or not hidden) and {"BaseGen", "NovelGen"} <= set(e.sides):
            label = "this submission" if mine else e.username
            points.append((label, e.sides["BaseGen"], e.sides["NovelGen"]))
    return points


def report_response(submission: Submission, run: Run, phase: Phase, *,
                    download: bool = False) -> HTMLResponse:
    """The rendered report; `download` asks the browser to save it instead of showing it."""
    extra = {"submission": f"#{submission.id}", "run": f"{run.index} (seed {run.seed})",
             "phase": phase.name}
    if submission.note:
        extra["note"] = submission.note
    html = render_detailed_results(
        run.summary or {}, run_records(run),
        title=f"Submission {submission.id}, run {run.index}: detailed results", extra=extra,
        protocol=(phase.protocol or {}).get("name"),
        id_vs_ood_points=id_vs_ood_points(submission, phase) or None)
    if not download:  # in the browser: a way back to the submission (a saved copy has none)
        html = _with_back_link(html, f"/submissions/{submission.id}",
                               f"\u2190 Submission #{submission.id}")
    name = f"submission-{submission.id}-run-{run.index}.html"
    disposition = "attachment" if download else "inline"
    return HTMLResponse(html, headers={
        "Content-Security-Policy": REPORT_CSP, "X-Content-Type-Options": "nosniff",
        "Content-Disposition": f'{disposition}; filename="{name}"'})


def _with_back_link(html: str, href: str, label: str) -> str:
    """`html` with a link as the first thing of its body (`href`, `label`: ours, not user text)."""
    link = f'<p class="back"><a href="{href}">{label}</a></p>'
    at = html.find("<body")
    if at < 0:
        return link + html
    end = html.find(">", at) + 1
    return html[:end] + link + html[end:]
