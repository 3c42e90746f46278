"""Head-and-tail log capture and control-character escaping (issue 13 item 8)."""

from __future__ import annotations

from pathlib import Path

import pytest

from submission_api.log_text import HeadTailBuffer, cap_text, escape_controls, read_head_tail
from worker.sandbox_streams import LogPump


def test_a_flooded_stream_keeps_its_first_and_last_lines():
    buffer = HeadTailBuffer(1000)
    buffer.append(b"CONFIG seed=1\n")
    for _ in range(10_000):
        buffer.append(b"x" * 97 + b"\n")
    buffer.append(b"Traceback: ValueError at the end\n")
    text = buffer.text()
    assert text.startswith("CONFIG seed=1") and text.endswith("ValueError at the end\n")
    assert buffer.truncated and len(buffer.head) + len(buffer.tail) == 1000
    assert "bytes cut here" in text


def test_the_sandbox_pump_keeps_head_and_tail_of_each_stream():
    frames = [(b"first-out\n", b"first-err\n")] + [(b"o" * 4096, b"e" * 4096)] * 100 + [
        (b"last-out\n", b"last-err\n")]
    pump = LogPump(iter(frames), cap=2048)
    pump.start()
    assert pump.join(5)
    for stream, name in ((pump.stdout, "out"), (pump.stderr, "err")):
        assert stream.text().startswith(f"first-{name}") and stream.text().endswith(
            f"last-{name}\n")
        assert stream.truncated


def test_a_log_file_and_a_stored_log_follow_the_same_rule(tmp_path: Path):
    data = "héllo " + "é" * 5000 + " the end"
    path = tmp_path / "log"
    path.write_text(data)
    from_file, cut = read_head_tail(path, 101)
    assert cut and from_file.startswith("héllo") and from_file.endswith(" the end")
    assert cap_text(data, 101) == from_file
    assert read_head_tail(path, 10**6) == (data, False) and cap_text(data, 10**6) == data


@pytest.mark.parametrize(("raw", "shown"), [
    ("\x1b]0;owned\x07", "\\x1b]0;owned\\x07"),  # set the window title, ring the bell
    ("\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H"),  # clear the screen
    ("ok\rFAKE", "ok\nFAKE"),  # a lone CR would overwrite "ok"
    ("line\r\n", "line\n"),
    ("\x9b31m", "\\x9b31m"),  # the one-byte CSI
    ("a\u202eb", "a\\u202eb"),  # right-to-left override
    ("tab\tand\nnewline kept", "tab\tand\nnewline kept"),
    ("\x00\x7f", "\\x00\\x7f"),
])
def test_control_characters_are_shown_not_obeyed(raw: str, shown: str):
    assert escape_controls(raw) == shown
