"""The one record every data check returns: where a problem is, what is wrong, how to fix it.

Checks collect every problem instead of stopping at the first, so that an organizer fixes a
dataset in one pass; functions that cannot go on raise `DataProblemsError` carrying the list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MAX_LISTED = 20
"""How many problems an exception message spells out; the rest are counted."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a dataset, a collection or an archive.

    `where` is a path (with a row or key where useful), `what` says what was found and what was
    expected, `fix` says how to repair it.
    """

    where: str
    what: str
    fix: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what} Fix: {self.fix}"


def format_problems(problems: Sequence[Problem], limit: int = MAX_LISTED) -> str:
    """Render problems one per line, at most `limit` of them, then a count of the others."""
    lines = [f"- {p}" for p in problems[:limit]]
    if len(problems) > limit:
        lines.append(f"- ... and {len(problems) - limit} more problems (run `arena data check`).")
    return "\n".join(lines)


class DataProblemsError(ValueError):
    """Raised when data cannot be used; `problems` lists everything that is wrong."""

    def __init__(self, subject: str, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__(
            f"{subject}: {len(self.problems)} problem(s) found.\n{format_problems(self.problems)}"
        )
