"""Participant output as the platform keeps and shows it: the head and the tail of a long log,
and control characters made visible.

One rule everywhere a log is capped (the Docker sandbox's stream pump, the local executor's
log files, the server's stored run log): keep the first half of the cap and the last half, with
a marker saying how much was cut between. The head holds what the code printed first (its
configuration, the first warnings); the tail holds the final traceback. Capping only one end, as
the sandbox (head) and the server (tail) once did, lost one or the other.

Displaying a log is a terminal attack surface: ESC starts escape sequences (rewrite the screen,
set the window title, on some terminals answer back), BEL rings, a lone CR overwrites the line
to hide what came before, bidi controls reorder text. `escape_controls` renders them visibly
(`\\x1b`, `\\x07`, `\\u202e`; a lone CR becomes a line break) before any CLI or web display.
Pure Python: it runs in the worker, the server and the participant's `arena` CLI.
"""

from __future__ import annotations

import re
from pathlib import Path

CUT_MARK = "\n[... {cut} bytes cut here; the first {head} and the last {tail} bytes are kept ...]\n"


class HeadTailBuffer:
    """Keeps the first `cap // 2` and the last `cap - cap // 2` bytes of a stream appended in
    chunks, and counts what falls between (memory stays within `cap` plus one chunk)."""

    def __init__(self, cap: int) -> None:
        self.head_cap = cap // 2
        self.tail_cap = cap - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def append(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            excess = len(self.tail) - self.tail_cap
            if excess > 0:
                del self.tail[:excess]

    @property
    def dropped(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    @property
    def truncated(self) -> bool:
        return self.dropped > 0

    def text(self) -> str:
        """The kept bytes as text (invalid UTF-8 replaced), with the cut marked."""
        return join_head_tail(bytes(self.head), bytes(self.tail), self.dropped)


def join_head_tail(head: bytes, tail: bytes, cut: int) -> str:
    if cut <= 0:
        return (head + tail).decode("utf-8", errors="replace")
    tail = tail.lstrip(bytes(range(0x80, 0xC0)))  # a character split by the cut
    return (head.decode("utf-8", errors="ignore") + CUT_MARK.format(
        cut=cut, head=len(head), tail=len(tail)) + tail.decode("utf-8", errors="replace"))


def read_head_tail(path: Path, cap: int) -> tuple[str, bool]:
    """The head and tail of a log file within `cap` bytes, and whether anything was cut."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        if size <= cap:
            return handle.read().decode("utf-8", errors="replace"), False
        head = handle.read(cap // 2)
        handle.seek(size - (cap - cap // 2))
        tail = handle.read()
    return join_head_tail(head, tail, size - len(head) - len(tail)), True


def cap_text(text: str, cap: int) -> str:
    """`text` within `cap` UTF-8 bytes (plus the marker), its head and tail kept."""
    data = text.encode("utf-8", errors="replace")
    if len(data) <= cap:
        return text
    buffer = HeadTailBuffer(cap)
    buffer.append(data)
    return buffer.text()


# C0 controls but TAB and LF, DEL, C1 controls (0x9b is a one-byte CSI), bidi overrides and
# isolates, and the line/paragraph separators some terminals honour.
_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x80-\x9f\u2028\u2029\u202a-\u202e"
                       "\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """`text` safe to print on a terminal or a page: CRLF and lone CR become LF, every other
    control character its visible escape (ESC -> `\\x1b`)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROLS.sub(_visible, text)
