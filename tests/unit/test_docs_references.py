"""The docs' prose names a function or constant beside the file that holds it (`path.py` `name`,
`name` (`path.py`), `path.py:name`, `name` in `path.py`): each such name must be defined in
that file (issue 35.5: docs/internals.md sent readers to the wrong file; the code blocks are
checked by test_internals_doc.py). Dotted names (log events, settings keys) and builtins are
not looked up."""

from __future__ import annotations

import builtins
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("server", "submission_api", "worker", "starting_kit", "tests", "benchmarks",
            "examples", "scripts")
_ID = r"([A-Za-z_]\w*)(?:\([^`)]*\)?)?"
_PATH = r"([\w./-]+\.py)"
PAIRS = [  # (pattern, index of the name group, index of the path group)
    (re.compile(rf"`{_ID}`\s*\(`{_PATH}"), 1, 2),
    (re.compile(rf"`{_ID}`\s+(?:in|of|from)\s+`{_PATH}`"), 1, 2),
    (re.compile(rf"`{_PATH}`(?:'s)?\s*`{_ID}`"), 2, 1),
    (re.compile(rf"`{_PATH}`\s*\(`{_ID}`"), 2, 1),
    (re.compile(rf"`{_PATH}:{_ID}`"), 2, 1),
]
DEFINED = re.compile(r"^\s*(?:(?:async\s+)?def|class)\s+(\w+)|^\s*(\w+)\s*(?::[^=\n]*)?=", re.M)


def _python_files() -> list[str]:
    return [p.relative_to(ROOT).as_posix() for folder in PACKAGES
            for p in (ROOT / folder).rglob("*.py")]


def _names(path: str, cache: dict[str, set[str]]) -> set[str]:
    if path not in cache:
        text = (ROOT / path).read_text(errors="replace")
        cache[path] = {a or b for a, b in DEFINED.findall(text)}
    return cache[path]


def misplaced(text: str, files: list[str]) -> list[tuple[int, str, str]]:
    """(line, name, path) for each name the text places in a file that does not define it."""
    cache: dict[str, set[str]] = {}
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for pattern, name_at, path_at in PAIRS:
            for match in pattern.finditer(line):
                name, path = match.group(name_at), match.group(path_at).lstrip("./")
                if name.isdigit() or hasattr(builtins, name):
                    continue
                candidates = [f for f in files if f == path or f.endswith("/" + path)]
                if candidates and not any(name in _names(f, cache) for f in candidates):
                    found.append((number, name, path))
    return found


def test_names_beside_a_file_in_the_docs_are_defined_there():
    files = _python_files()
    docs = sorted((ROOT / "docs").glob("*.md"))
    assert len(docs) >= 5
    wrong = {doc.name: misplaced(doc.read_text(), files) for doc in docs}
    assert {name: found for name, found in wrong.items() if found} == {}


def test_a_name_placed_in_the_wrong_file_is_found():
    files = _python_files()
    text = ("turns it into a 409 (`server/services/teams.py` `committing`)\n"
            "`move_run` (`server/services/runs.py`) and `server/services/queue.py:move_run`\n"
            "`requeue_or_fail` in `server/services/runs.py`, `is_platform_fault` "
            "(`worker/pipeline/faults.py`)\n")
    assert misplaced(text, files) == [(1, "committing", "server/services/teams.py"),
                                      (2, "move_run", "server/services/runs.py"),
                                      (2, "move_run", "server/services/queue.py")]
