"""One normalization of user and team names (issue 33.8): what is shown, what must be unique,
and what is refused. The key is TR39's confusables skeleton (ICU), casefolded."""

from __future__ import annotations

import pytest

from server.core.errors import InvalidInputError
from server.services.names import check_name, display_name, name_key


@pytest.mark.parametrize("raw, shown", [
    ("  Few-shot   Foxes ", "Few-shot Foxes"),
    ("Ｆｅｗ-shot Foxes", "Few-shot Foxes"),
    ("Few\tshot\nFoxes", "Few shot Foxes"),
])
def test_display_name_is_nfkc_with_single_spaces(raw: str, shown: str) -> None:
    assert display_name(raw) == shown


@pytest.mark.parametrize("lookalike, original", [
    ("Few-shot Fоxes", "Few-shot Foxes"),        # Cyrillic о
    ("Ｆｅｗ-shot Foxes", "Few-shot Foxes"),      # full-width
    ("FEW-SHOT FOXES", "Few-shot Foxes"),         # case
    ("ᏴᎡᎪᏙᎾ", "BRAVO"),                           # Cherokee
    ("ada_I", "ada_l"),                           # capital I, small L
    ("M", "rn"),
    ("Straße", "STRASSE"),
])
def test_lookalikes_share_one_key(lookalike: str, original: str) -> None:
    assert name_key(lookalike) == name_key(original)


@pytest.mark.parametrize("a, b", [("Few-shot Foxes", "Few-shot Owls"), ("ada", "adb"),
                                  ("Team Москва", "Team Moskva")])
def test_different_names_have_different_keys(a: str, b: str) -> None:
    assert name_key(a) != name_key(b)


@pytest.mark.parametrize("raw, code", [
    ("Few-shot Fоxes", "name.mixed_script"),
    ("Fοxes", "name.mixed_script"),               # Greek omicron
    ("ab\u200dcd", "name.invisible"),
    ("ab\u202ecd", "name.invisible"),             # right-to-left override
    ("ab\x00cd", "name.invisible"),
])
def test_unsafe_names_are_refused_with_a_reason(raw: str, code: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        check_name(raw, "team name")
    assert info.value.code == code
    assert "team name" in str(info.value)


@pytest.mark.parametrize("raw", ["Few-shot Foxes", "Team Москва", "日本語チームabc", "Ünïcode Café",
                                 "ᏴᎡᎪᏙᎾ", "Ελληνικά"])
def test_honest_names_pass(raw: str) -> None:
    assert check_name(raw) == display_name(raw)
