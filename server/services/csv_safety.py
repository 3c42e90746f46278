"""Spreadsheet-safe CSV cells (OWASP "CSV injection"): a cell that a spreadsheet would read as a
formula is prefixed with a single quote, so `=HYPERLINK(...)` from a participant's team name,
method or fact-sheet answer is shown as text, never evaluated. Shared by every CSV export
(leaderboard, fact sheets)."""

from __future__ import annotations

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutralize_cell(value: object) -> object:
    """`value` unchanged, unless it is a string a spreadsheet would take for a formula (it starts
    with = + - @, a tab or a carriage return): then that string behind a `'`. Numbers pass as
    they are (a negative score is a number, not a formula)."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value
