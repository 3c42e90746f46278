"""`arena data check` (issue 14, item 14): repeated problems print as one row with a count and
examples, and the class-size threshold comes from a named protocol (said on screen), not from an
unnamed default."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

from starting_kit.commands.data import app as data_app
from starting_kit.commands.data import min_images_for
from submission_api.protocols import ProtocolParams


def run(*args: str) -> tuple[int, str]:
    app = typer.Typer()
    app.add_typer(data_app, name="data")
    result = CliRunner().invoke(app, ["data", "check", *args], env={"COLUMNS": "200"})
    return result.exit_code, result.output


def test_repeated_class_problems_are_one_row_with_a_count(tiny_collection):
    code, out = run(str(tiny_collection / "stripes"), "--min-images-per-class", "30")
    assert code == 1
    assert "6 problem(s) of 1 kinds" in out
    assert "6 times, e.g. class" in out
    assert out.count("fewer than the 30") == 1


def test_the_threshold_comes_from_the_named_protocol_and_is_said(tiny_collection):
    code, out = run(str(tiny_collection / "stripes"), "--protocol", "within-domain")
    assert code == 0, out
    assert "protocol within-domain: 5 shot(s) + 20 queries = 25 images per class" in out
    code, out = run(str(tiny_collection / "stripes"))
    assert "the default; pass --protocol or --phase" in out
    code, out = run(str(tiny_collection / "stripes"), "--protocol", "cross-domian")
    assert code != 0 and "expected one of" in out


def test_min_images_per_protocol():
    assert min_images_for(ProtocolParams.from_dict({"name": "cross-domain"}))[0] == 21
    assert min_images_for(ProtocolParams.from_dict({"name": "fixed"}))[0] == 20
    assert min_images_for(ProtocolParams.from_dict({"name": "id-ood"}))[0] == 30
