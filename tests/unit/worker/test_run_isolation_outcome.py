"""The worker sends the run's isolation line with `finish` (issue 34.4): read from the task
server's report, whatever the verdict; absent when meta-test never started."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from submission_api.runner.task_server import MetaTestReport
from worker.pipeline.score import Outcome, read_isolation


def test_the_isolation_line_travels_from_the_task_servers_report_to_the_finish_body(
        tmp_path: Path):
    assert read_isolation(tmp_path) is None  # meta-test never started
    report = MetaTestReport(n_tasks=2, isolation="shared namespaces (refused here)",
                            task_namespaces=False)
    (tmp_path / "meta_test.json").write_text(json.dumps(asdict(report)))
    line = read_isolation(tmp_path)
    assert line == "shared namespaces (refused here)"
    body = Outcome("failed", "crashed", "m", isolation=line).to_finish_body(3)
    assert body["isolation"] == line
