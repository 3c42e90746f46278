"""A submission's imports checked against the sandbox image (issue 24, trap 8): `import
sklearn` passes in the participant's venv but not in the sandbox, so `arena zip` and `arena run`
say so before upload, with the package's real name and advice right for compiled parts."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from starting_kit.cli import zip_command
from submission_api.imports import check_imports, module_advice

MODEL = """import os
import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
import tqdm
from . import helpers
import helpers
from api import MetaLearner
"""


def _submission(tmp_path):
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "model.py").write_text(MODEL)
    (folder / "helpers.py").write_text("import json\n")
    return folder


def test_only_what_the_image_lacks_is_reported_with_its_line(tmp_path):
    missing = check_imports(_submission(tmp_path), None)
    assert [(m.module, m.file, m.line) for m in missing] == [
        ("sklearn", "model.py", 4), ("tqdm", "model.py", 5)]
    sklearn, tqdm = missing
    assert sklearn.package == "scikit-learn" and sklearn.compiled
    assert not tqdm.compiled
    assert check_imports(tmp_path / "sub", "someone/else:latest") is None


def test_compiled_packages_get_a_wheel_for_the_sandbox_not_a_plain_vendor_install():
    advice = module_advice("sklearn")
    assert "scikit-learn" in advice["command"] and "pip install --target vendor sklearn" \
        not in advice["command"]
    assert "--only-binary=:all:" in advice["command"] and "--python-version" in advice["command"]
    assert module_advice("tqdm")["command"] == "pip install --target vendor tqdm"


def test_arena_zip_warns_before_upload(tmp_path):
    app = typer.Typer()
    app.command()(zip_command)
    folder = _submission(tmp_path)
    result = CliRunner().invoke(app, [str(folder), "--output", str(tmp_path / "s.zip")],
                                env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert "model.py:4 imports sklearn, which the sandbox image metadl-arena/sandbox:cpu does " \
           "not have" in flat, flat
    assert "scikit-learn" in flat and "tqdm" in flat
    assert (tmp_path / "s.zip").is_file()
