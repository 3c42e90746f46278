"""`arena compare A B` and `arena leaderboard --stats` against a real app (issue 15): the paired
difference with its intervals and verdict, the board with rank ranges and tied groups, and a
phase that does not show statistics refusing the comparison."""

from __future__ import annotations

from test_cli_participant import _token, arena_cli  # noqa: F401  (fixture)
from test_leaderboard_statistics import three_entries


def test_compare_prints_the_difference_its_intervals_and_the_verdict(env, arena_cli):  # noqa: F811
    phase_id = three_entries(env, "during")
    ids = env.submission_ids
    code, out = arena_cli("compare", str(ids["bob"]), str(ids["ann"]),
                          token=_token(env.headers["bob"]))
    assert code == 0, out
    assert f"{ids['bob']} − {ids['ann']} = " in out and "not significant" in out
    assert "paired t-test over 60 shared tasks" in out
    # two datasets: no bootstrap over them, and the answer says why (issue 22)
    assert "bootstrap over 2 datasets" not in out and "cautious" not in out
    assert "2 test dataset(s): too few for an interval over datasets" in out
    assert "Wilcoxon signed-rank p = " in out
    code, out = arena_cli("compare", str(ids["carl"]), str(ids["bob"]),
                          token=_token(env.headers["carl"]))
    assert code == 0 and " in score, significant" in out and " = -0." in out

    code, out = arena_cli("leaderboard", "--phase", str(phase_id), "--stats",
                          token=_token(env.headers["ann"]))
    assert code == 0, out
    assert "rank range" in out and "1–2" in out and "3–3" in out and "Holm" in out


def test_compare_is_refused_where_the_phase_does_not_show_statistics(env, arena_cli):  # noqa: F811
    three_entries(env, "never")
    ids = env.submission_ids
    code, out = arena_cli("compare", str(ids["bob"]), str(ids["ann"]),
                          token=_token(env.headers["bob"]))
    assert code != 0 and "does not show statistics" in out
