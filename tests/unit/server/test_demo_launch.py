"""`arena demo` checks before it works (issue 24, traps 14-15): a taken port is one line with
the fix, said before any data is generated; an earlier demo's database is wiped only when the
person agrees (or a script says --fresh), and kept with --keep."""

from __future__ import annotations

import socket

import pytest

from server.demo import DemoOptions, run_demo
from server.demo_launch import LaunchError, check_port_free, decide_fresh


@pytest.fixture
def taken_port():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield busy.getsockname()[1]


def test_a_taken_port_is_one_line_with_the_fix(taken_port):
    with pytest.raises(LaunchError) as caught:
        check_port_free(taken_port)
    assert str(caught.value).count("\n") == 0
    assert f"port {taken_port}" in str(caught.value) and f"--port {taken_port + 1}" in str(
        caught.value)


def test_the_demo_says_so_before_generating_any_data(taken_port, tmp_path, capsys):
    assert run_demo(DemoOptions(data_dir=tmp_path, port=taken_port)) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"port {taken_port}" in err
    assert not (tmp_path / "sample_data").exists()


def test_an_earlier_database_is_wiped_only_when_agreed(tmp_path):
    asked: list[str] = []

    def answer(value: bool):
        return lambda question: asked.append(question) or value

    assert decide_fresh(tmp_path, None, answer(False)) is True  # nothing to lose: no question
    assert asked == []
    (tmp_path / "arena.db").write_text("")
    assert decide_fresh(tmp_path, None, answer(False)) is False
    assert "earlier demo's database" in asked[0]
    assert decide_fresh(tmp_path, None, answer(True)) is True
    assert decide_fresh(tmp_path, False, answer(True)) is False  # --keep
    assert decide_fresh(tmp_path, True, answer(False)) is True  # --fresh
    assert decide_fresh(tmp_path, None, None) is True  # a script: fresh, and it says so
