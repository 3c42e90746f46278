"""What `arena run` accepts (issue 14, local runs): the zip participants upload runs as it is
(extracted with the platform's checks), a file that is not a zip and a folder without model.py
are refused with where model.py was looked for — before any data is compiled."""

from __future__ import annotations

import zipfile
from pathlib import Path

from typer.testing import CliRunner

from starting_kit.cli import app
from submission_api.submission_zip import build_submission_zip
from tests.unit.runner.test_local_run import write_submission


def arena_run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["run", *args], env={"COLUMNS": "200"})
    return result.exit_code, result.output


def test_the_uploaded_zip_runs_as_it_is(tmp_path, tiny_collection, arena_cache):
    folder = write_submission(tmp_path / "sub")
    archive = build_submission_zip(folder, tmp_path / "SUBMISSION.zip")
    code, out = arena_run(str(archive), "--data", str(tiny_collection), "--output",
                          str(tmp_path / "out"), "--tasks-per-dataset", "2", "--quiet",
                          "--cache", str(arena_cache))
    assert code == 0, out
    assert "as the platform would" in " ".join(out.split()) and "score" in out
    assert (tmp_path / "out" / "scores.json").is_file()


def test_a_missing_model_py_says_where_it_was_looked_for(tmp_path, tiny_collection):
    write_submission(tmp_path / "outer" / "inner")
    code, out = arena_run(str(tmp_path / "outer"), "--data", str(tiny_collection))
    flat = " ".join(out.split())
    assert code == 2
    assert f"model.py is missing: looked for {(tmp_path / 'outer' / 'model.py').resolve()}" in flat
    assert "inner: pass that folder" in flat
    assert "No module named" not in out


def test_a_file_that_is_not_a_zip_is_refused_with_what_to_pass(tmp_path, tiny_collection):
    stray = tmp_path / "model.py"
    stray.write_text("x = 1\n")
    code, out = arena_run(str(stray), "--data", str(tiny_collection))
    assert code == 2 and "is a file but not a zip" in " ".join(out.split())


def test_an_unsafe_zip_is_refused_as_the_platform_would(tmp_path, tiny_collection):
    archive = tmp_path / "bad.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("../escape.py", "x = 1\n")
    code, out = arena_run(str(archive), "--data", str(tiny_collection))
    assert code == 2 and "refused" in out and not Path(tmp_path.parent / "escape.py").exists()
