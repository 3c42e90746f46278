"""The participant package ships only its code and templates: it is mounted into every sandbox
and installed on participants' laptops, so a stray test artifact there is visible to all (a
`submission_api/arena-write-probe` once was committed; issue 13 item 9)."""

from __future__ import annotations

from pathlib import Path

import submission_api

ALLOWED_SUFFIXES = {".py", ".j2", ".json", ".typed"}


def test_submission_api_holds_no_stray_files() -> None:
    root = Path(submission_api.__file__).resolve().parent
    stray = sorted(str(p.relative_to(root)) for p in root.rglob("*")
                   if p.is_file() and "__pycache__" not in p.parts
                   and p.suffix not in ALLOWED_SUFFIXES)
    assert stray == []
