"""`arena run`'s progress when stdout is not a terminal (issue 32.5: a bar there was one frozen
line in a log file or CI): plain lines at a stage's start, every PLAIN_EVERY_S while it moves,
and at its end; a real `arena run` piped to a file prints them."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

from starting_kit.sample_data import generate_collection
from submission_api.runner.progress import PLAIN_EVERY_S, ProgressView


def test_a_pipe_gets_plain_lines_at_start_periodically_and_at_the_end(tmp_path):
    now = [0.0]
    out = io.StringIO()  # not a tty
    view = ProgressView(tmp_path, time_limit_s=600, stream=out, clock=lambda: now[0])
    with view:
        for t, done in [(0, 0), (1, 1), (PLAIN_EVERY_S + 1, 7), (PLAIN_EVERY_S + 2, 8),
                        (PLAIN_EVERY_S + 3, 10)]:
            now[0] = t
            (tmp_path / "progress.json").write_text(json.dumps(
                {"stage": "meta_test", "done": done, "total": 10}))
            view.refresh()
    lines = out.getvalue().splitlines()
    assert [line.split(" (")[0] for line in lines] == [
        "progress: test tasks: 0 of 10", "progress: test tasks: 7 of 10",
        "progress: test tasks: 10 of 10"]
    assert "s elapsed" in lines[-1] and "s left of the limit" in lines[-1]


def test_arena_run_piped_to_a_file_prints_progress_lines(tmp_path):
    data = generate_collection(tmp_path / "data", n_classes=5, n_images=12,
                               domains=("stripes", "spectra"))
    baseline = Path(__file__).resolve().parents[3] / "starting_kit" / "baselines" / "random"
    with (tmp_path / "log.txt").open("w") as log:
        done = subprocess.run(
            [sys.executable, "-m", "starting_kit.cli", "run", str(baseline), "--data", str(data),
             "--output", str(tmp_path / "out"), "--cache", str(tmp_path / "cache"),
             "--protocol", "fixed", "--ways", "3", "--shots", "2", "--queries", "3",
             "--tasks-per-dataset", "4", "--threads", "1"],
            stdout=log, stderr=subprocess.STDOUT, timeout=600, check=False)
    text = (tmp_path / "log.txt").read_text()
    assert done.returncode == 0, text
    assert "progress: test tasks: 4 of 4" in text, text
