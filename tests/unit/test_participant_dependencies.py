"""A participant's install carries only what shipped code imports (issue 35.5): the t
distribution is hand-written (`submission_api/scoring/student_t.py`) so the kit needs no SciPy,
and so SciPy is a dev dependency (tests compare the scoring with it), not a participant one."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("submission_api", "starting_kit", "server", "worker")


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in requirements}


def _imported_roots() -> set[str]:
    roots: set[str] = set()
    for package in SHIPPED:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    roots |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    roots.add(node.module.split(".")[0])
    return roots


def test_scipy_is_not_a_participant_dependency_and_no_shipped_code_imports_it():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "scipy" not in _names(project["dependencies"])
    assert "scipy" in _names(project["optional-dependencies"]["dev"])
    assert "scipy" not in _imported_roots()
