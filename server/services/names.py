"""One normalization of the names people pick: usernames and team names (issue 33.8).

Two forms of every name:
- `display_name(raw)`: what is stored and shown. Unicode NFKC (so full-width "Ｆｅｗ" is "Few"),
  runs of whitespace collapsed to one space, stripped.
- `name_key(raw)`: what must be unique. The Unicode TR39 confusables skeleton of the display
  name (ICU's SpoofChecker, the reference implementation: a maintained table, not ours),
  casefolded, skeletonized again and stripped of combining marks, so "Few-shot Fоxes" (Cyrillic о),
  "ＦＥＷ-SHOT FOXES" and "Few-shot Foxes" share one key, and so do "ᏴᎡᎪᏙᎾ" (Cherokee) and "BRAVO".

`check_name(raw, what)` refuses what no honest name needs: control and format characters (zero
width joiners, bidi overrides), unassigned code points, and words that mix scripts in a way TR39
calls unsafe (Latin with Cyrillic or Greek in one word; Latin with Han and kana stays allowed).
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

import icu

from server.core.errors import InvalidInputError

# Control, format, surrogate, private-use and unassigned code points: invisible or undefined.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


@lru_cache(maxsize=1)
def _skeletons() -> icu.SpoofChecker:
    """The checker for skeletons (built once, on first use: ICU loads its tables then)."""
    return icu.SpoofChecker()


@lru_cache(maxsize=1)
def _script_checker() -> icu.SpoofChecker:
    """TR39 "highly restrictive": one script per word, or Latin with Han/kana/Hangul/Bopomofo."""
    checker = icu.SpoofChecker()
    checker.setRestrictionLevel(icu.URestrictionLevel.HIGHLY_RESTRICTIVE)
    checker.setChecks(icu.USpoofChecks.RESTRICTION_LEVEL
                      | icu.USpoofChecks.MIXED_SCRIPT_CONFUSABLE
                      | icu.USpoofChecks.INVISIBLE)
    return checker


def display_name(raw: str) -> str:
    """The stored and shown form: NFKC, whitespace runs as one space, no leading or trailing."""
    return " ".join(unicodedata.normalize("NFKC", raw).split())


def name_key(raw: str) -> str:
    """The uniqueness key: two names with one key look alike and cannot both exist."""
    skeletons = _skeletons()
    # Upper case first, so every case of a name starts alike ("ivan", "Ivan": issue 33.3's
    # login is case-insensitive); then skeleton, fold, skeleton: "I" and "l" meet before
    # folding, "M" and "rn" after it.
    once = skeletons.getSkeleton(0, display_name(raw).upper()).casefold()
    twice = skeletons.getSkeleton(0, once).casefold()
    decomposed = unicodedata.normalize("NFD", twice)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def check_name(raw: str, what: str = "name") -> str:
    """Return the display form of `raw`, or raise InvalidInputError saying what to change.

    `what` names the field in the message ("team name", "username").
    """
    name = display_name(raw)
    for char in name:
        if unicodedata.category(char) in _REFUSED_CATEGORIES:
            raise InvalidInputError(
                f"the {what} {name!r} holds the invisible or control character "
                f"U+{ord(char):04X}; type it again without it", code="name.invisible")
    for word in name.split(" "):
        if _script_checker().check(word):
            raise InvalidInputError(
                f"the {what} {name!r} mixes alphabets in the word {word!r} (for instance "
                "Latin with Cyrillic or Greek letters that look alike); write each word in "
                "one alphabet", code="name.mixed_script")
    return name
