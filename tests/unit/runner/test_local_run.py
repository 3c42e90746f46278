"""`arena run` end to end on a tiny collection: the outputs a participant reads, every failure a
submission can cause ending in a clear state, and NeurIPS'22 zips running unchanged.

Each run costs seconds of CPU (a meta-train process and a meta-test side, each importing torch),
so the runs of the same submission are made once per module (`centroid_runs`, `fault_runs`) and
the tests that read different facts of one run share it; each still reads the run it checks.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from submission_api.protocols import ProtocolParams
from submission_api.runner.local import LocalRunResult, run_local

QUICK = ProtocolParams.from_dict({"name": "cross-domain", "tasks_per_dataset": 3})

# A deterministic nearest-class-mean learner on raw pixels: fast, and clearly above chance.
CENTROID_MODEL = """
import numpy as np, torch
from submission_api.api import MetaLearner, Learner, Predictor

class MyPredictor(Predictor):
    def __init__(self, means):
        self.means = means
    def predict(self, query_set):
        x = query_set.flatten(1)
        return (-torch.cdist(x, self.means)).numpy(){predict_suffix}

class MyLearner(Learner):
    def fit(self, support_set):
        x, y, _, n_ways, _ = support_set
        x = x.flatten(1)
        return MyPredictor(torch.stack([x[y == c].mean(0) for c in range(n_ways)]))
    def save(self, path):
        open(path + "/weights.txt", "w").write("none")
    def load(self, path):
        assert open(path + "/weights.txt").read() == "none"

class MyMetaLearner(MetaLearner):
    def meta_fit(self, meta_train_generator, meta_valid_generator):
        for task in meta_train_generator(2):
            self.log(task, np.zeros(len(task.query_set[1]), dtype=int))
        {meta_fit_extra}
        return MyLearner()
"""


def write_submission(
    folder: Path,
    predict_suffix: str = "",
    meta_fit_extra: str = "pass",
    extra_files: dict[str, str] | None = None,
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    code = CENTROID_MODEL.replace("{predict_suffix}", predict_suffix)
    (folder / "model.py").write_text(code.replace("{meta_fit_extra}", meta_fit_extra))
    for name, content in (extra_files or {}).items():
        (folder / name).write_text(textwrap.dedent(content))
    return folder


def run(tmp_path: Path, submission: Path, collection: Path, cache: Path, **kwargs):
    return run_local(
        submission, collection, tmp_path / "out", protocol=QUICK, cache_dir=cache, **kwargs
    )


DEEP = Path("d" * 60) / ("e" * 60)
"""A unix socket path holds 107 bytes; the task channel lives in the run's work folder, so the
plain run's output folder is this deep below its temporary folder."""


@pytest.fixture(scope="module")
def centroid_runs(tmp_path_factory, tiny_collection, arena_cache) -> dict[str, LocalRunResult]:
    """The centroid submission run three times: "plain" (seeds 0, into a folder deeper than a
    socket path takes, its work folder removed), "other_seed" (seed 8, its work folder kept for
    the test that tampers with it) and "other_phase" (phase seed 5)."""
    root = tmp_path_factory.mktemp("centroid")
    sub = write_submission(root / "sub")
    runs = {"plain": ({}, root / "plain" / DEEP),
            "other_seed": ({"seed": 8, "keep_work": True}, root / "other_seed"),
            "other_phase": ({"phase_seed": 5}, root / "other_phase")}
    return {name: run_local(sub, tiny_collection, out, protocol=QUICK, cache_dir=arena_cache,
                            **kwargs)
            for name, (kwargs, out) in runs.items()}


def test_a_finished_run_writes_scores_predictions_and_report(centroid_runs):
    result = centroid_runs["plain"]
    out = result.output_dir

    assert result.state == "finished", result.message
    scores = json.loads((out / "scores.json").read_text())
    assert scores["n_tasks"] == 6  # 3 tasks x 2 meta-test datasets
    assert {"score", "ci95", "n_tasks", "duration_s", "tasks"} <= set(scores)
    assert {"dataset", "ways", "shots", "score"} <= set(scores["tasks"][0])
    assert scores["score"] > 0.1  # raw-pixel centroids beat chance on the synthetic domains
    assert len(list((out / "predictions").glob("task_*.npy"))) == 6
    html = (out / "detailed_results.html").read_text()
    assert "data:image/png;base64," in html
    assert (out / "logs" / "meta_train" / "performance.csv").exists()


def test_test_tasks_depend_on_the_phase_seed_only(centroid_runs):
    first = centroid_runs["plain"].scores
    other_run = centroid_runs["other_seed"].scores
    other_phase = centroid_runs["other_phase"].scores
    assert first is not None and other_run is not None and other_phase is not None

    def shapes(scores: dict) -> list[tuple[int, int]]:
        return [(t["ways"], t["shots"]) for t in scores["tasks"]]

    # MetaDL: a submission's runs meet the same test tasks; the phase's seed alone draws them.
    assert first["tasks"] == other_run["tasks"]
    assert shapes(first) != shapes(other_phase)


FAULTS = [
    ("raise RuntimeError('boom in meta_fit')", "", "meta_fit_error", "boom in meta_fit"),
    ("pass", " + float('nan')", "bad_predictions", "NaN"),
    ("pass", "[:1]", "bad_predictions", "expected"),
    ("pass", ".tolist() and [object()]", "predict_error", "numeric"),
    # The worker's verdict (tests/unit/contract/test_verdicts.py): the stage it ended in.
    ("import os; os._exit(3)", "", "meta_fit_error", "meta_fit ended the process with exit "
     "code 3"),
]


@pytest.fixture(scope="module")
def fault_runs(tmp_path_factory, tiny_collection, arena_cache) -> list[LocalRunResult]:
    """One run per entry of FAULTS (a submission broken in meta_fit or in predict), in order."""
    root = tmp_path_factory.mktemp("faults")
    return [run(root / str(i), write_submission(root / str(i) / "sub", suffix, extra),
                tiny_collection, arena_cache)
            for i, (extra, suffix, _, _) in enumerate(FAULTS)]


@pytest.mark.parametrize(("meta_fit_extra", "predict_suffix", "reason", "words"), FAULTS)
def test_participant_faults_end_failed_with_a_clear_reason(
    fault_runs, meta_fit_extra, predict_suffix, reason, words
):
    result = fault_runs[FAULTS.index((meta_fit_extra, predict_suffix, reason, words))]

    assert (result.state, result.reason) == ("failed", reason)
    assert words in result.message


def test_an_import_error_is_reported_with_its_traceback(tmp_path, tiny_collection, arena_cache):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "model.py").write_text("import no_such_module_here\n")
    result = run(tmp_path, sub, tiny_collection, arena_cache)

    assert (result.state, result.reason) == ("failed", "import_error")
    assert "no_such_module_here" in result.message and "Traceback" in result.message


def test_an_endless_meta_fit_is_stopped_at_the_time_limit(tmp_path, tiny_collection, arena_cache):
    sub = write_submission(tmp_path / "sub", meta_fit_extra="while True: pass")
    result = run(tmp_path, sub, tiny_collection, arena_cache, time_limit_s=3)

    assert (result.state, result.reason) == ("timed_out", "time_limit")


def test_predictions_are_read_from_the_trusted_side_only(centroid_runs):
    # Whatever lies in output/predictions (meta-train could write there) is never scored.
    # The one test that tampers with a run's folders: "other_seed" (keep_work) is its own.
    result = centroid_runs["other_seed"]
    assert result.state == "finished" and result.scores is not None
    out = result.output_dir
    answers = out / ".work" / "answers"
    (out / "predictions" / "task_00000.npy").write_bytes(b"garbage")

    from submission_api.runner.scorer import ParticipantFailure, score_output

    assert score_output(out, answers).summary["mean"] == result.scores["mean"]
    # Defence in depth: even the trusted folder is read without following links.
    prediction = answers / "predictions" / "task_00000.npy"
    prediction.unlink()
    prediction.symlink_to(answers / "query_labels.npy")
    with pytest.raises(ParticipantFailure, match="link"):
        score_output(out, answers)


def test_the_work_folder_is_removed_after_success_and_failure(centroid_runs, fault_runs):
    finished = centroid_runs["plain"]
    failed = fault_runs[0]  # raised in meta_fit

    assert (finished.state, failed.state) == ("finished", "failed")
    assert (centroid_runs["other_seed"].output_dir / ".work").is_dir()  # kept when asked to
    assert not (finished.output_dir / ".work").exists()
    assert not (failed.output_dir / ".work").exists()


OLD_API = """
    import numpy as np
    from cdmetadl.ingestion.data_generator import Task

    class Predictor():
        def predict(self, dataset_test):
            raise NotImplementedError
    class Learner():
        def __init__(self):
            pass
    class MetaLearner():
        def __init__(self, train_classes, total_classes, logger):
            self.train_classes = train_classes
            self.total_classes = total_classes
            self.log = logger.log
    """
FLOOD = ("import sys\n        print('FIRST'); sys.stdout.write('x' * (8 << 20)); "
         "print('LAST', flush=True)")


@pytest.fixture(scope="module")
def neurips22_flood_run(tmp_path_factory, tiny_collection, arena_cache) -> LocalRunResult:
    """One run read by two tests: a NeurIPS'22 zip (its own copy of the 2022 api.py, its
    config.json) whose meta_fit floods stdout with 8 MiB between two marks. Each test reads its
    own fact of it: that the zip ran unchanged, and that the flood was kept to head and tail."""
    root = tmp_path_factory.mktemp("neurips22")
    sub = write_submission(
        root / "sub", meta_fit_extra=FLOOD,
        extra_files={"api.py": OLD_API, "config.json": '{"train_data_format": "task"}'},
    )
    model = (
        (sub / "model.py").read_text().replace("from submission_api.api import", "from api import")
    )
    (sub / "model.py").write_text(model)
    return run(root, sub, tiny_collection, arena_cache)


def test_a_neurips22_zip_with_its_own_api_copy_runs_unchanged(neurips22_flood_run):
    result = neurips22_flood_run
    assert "from api import" in (result.output_dir.parent / "sub" / "model.py").read_text()

    assert result.state == "finished", result.message


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ('{"train_config": {"N": 50}}', "ask fewer ways"),
        ('{"train_data_format": "tasks"}', "train_data_format"),
        ("{not json", "config.json"),
    ],
)
def test_a_config_the_data_cannot_serve_is_an_invalid_submission(tmp_path, tiny_collection,
                                                                 arena_cache, config, words):
    sub = write_submission(tmp_path / "sub", extra_files={"config.json": config})
    result = run(tmp_path, sub, tiny_collection, arena_cache)

    assert (result.state, result.reason) == ("failed", "invalid_submission")
    assert words in result.message


def test_a_flood_of_output_is_kept_to_its_head_and_tail(neurips22_flood_run):
    result = neurips22_flood_run  # its meta_fit wrote FIRST, 8 MiB, then LAST

    assert result.state == "finished", result.message
    kept = (result.output_dir / "stdout.txt").read_text()
    assert len(kept) < 2 << 20  # 8 MiB went in
    assert "FIRST" in kept[:4096] and "bytes cut here" in kept and kept.endswith("LAST\n")


def test_a_missing_model_py_is_named_with_where_it_was_looked_for(
        tmp_path, tiny_collection, arena_cache):
    (tmp_path / "empty").mkdir()
    result = run(tmp_path, tmp_path / "empty", tiny_collection, arena_cache)

    assert (result.state, result.reason) == ("failed", "import_error")
    assert f"model.py is missing: looked for {tmp_path / 'empty' / 'model.py'}" in result.message


def test_an_output_folder_deeper_than_a_socket_path_takes_still_runs(centroid_runs):
    result = centroid_runs["plain"]  # its output folder is DEEP below its temporary folder
    assert str(result.output_dir).endswith(str(DEEP))
    assert len(str(result.output_dir / "work" / "channel" / "control.sock")) > 107
    assert result.state == "finished", result.message
