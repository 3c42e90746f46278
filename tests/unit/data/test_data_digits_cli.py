"""`arena data digits OUT` writes the dataset into OUT itself (issue 24, trap 7), not into
OUT/digits: the folder the command names is the dataset folder."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from starting_kit.commands.data import app as data_app


def test_digits_writes_the_dataset_into_the_named_folder(tmp_path):
    app = typer.Typer()
    app.add_typer(data_app, name="data")
    out = tmp_path / "my-digits"
    result = CliRunner().invoke(app, ["data", "digits", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert (out / "labels.csv").is_file() and (out / "info.json").is_file()
    assert not (out / "digits").exists()
