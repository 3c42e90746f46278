"""docs/internals.md's code blocks place each function and class in a file (issue 35.5: three
sat under another file's comment): a `# path.py` comment on a line names the file of that line
and of the lines after it in the block, else the section heading's folder does. Each top-level
`def`/`class` there must be defined in that file (or under that folder)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PATH = re.compile(r"#\s*([\w/]+\.py)")
HEADING = re.compile(r"^#+ .*\(`([\w/]+/)`\)")
DEF = re.compile(r"^(?:def|class) (\w+)")


def _where_defined() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for package in ("submission_api", "server", "worker", "starting_kit"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.parse(path.read_text()).body:
                if isinstance(node, ast.FunctionDef | ast.ClassDef):
                    found.setdefault(node.name, set()).add(path.relative_to(ROOT).as_posix())
    return found


def _placed() -> list[tuple[int, str, str]]:
    """(line, name, the file or folder the doc places it in) for each top-level definition."""
    placed, folder, where, in_block = [], "", "", False
    for number, line in enumerate((ROOT / "docs/internals.md").read_text().splitlines(), 1):
        if line.startswith("```"):
            in_block, where = not in_block, folder
            continue
        heading = HEADING.match(line)
        if heading and not in_block:
            folder = heading.group(1)
        if not in_block:
            continue
        comment = PATH.search(line)
        where = comment.group(1) if comment else where
        name = DEF.match(line)
        if name:
            placed.append((number, name.group(1), where))
    return placed


def test_every_function_in_the_code_blocks_lives_where_the_doc_places_it():
    defined = _where_defined()
    placed = _placed()
    assert len(placed) >= 15
    wrong = [(line, name, where, sorted(defined.get(name, ())))
             for line, name, where in placed
             if not any(f.endswith(where) or (where.endswith("/") and f.startswith(where))
                        for f in defined.get(name, ()))]
    assert wrong == []
