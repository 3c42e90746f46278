"""The ID-vs-OOD scatter used by the leaderboard."""

import pytest

from submission_api.report import plot_id_vs_ood
from submission_api.report.figures import compute_ranks


def test_writes_a_png(tmp_path):
    path = plot_id_vs_ood([("a", 0.5, 0.2), ("b <$>", 0.4, 0.3)], tmp_path / "sub" / "x.png")
    assert path.read_bytes().startswith(b"\x89PNG")


def test_writes_an_svg_with_the_labels_and_rank_flips(tmp_path):
    svg = plot_id_vs_ood([("alpha", 0.5, 0.2), ("beta", 0.4, 0.3)], tmp_path / "x.svg")
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text


def test_refuses_other_formats(tmp_path):
    with pytest.raises(ValueError, match=r"\.png or \.svg"):
        plot_id_vs_ood([("a", 0.1, 0.2)], tmp_path / "x.pdf")


def test_ranks_higher_first_with_shared_ties():
    assert compute_ranks([0.5, 0.9, 0.5, 0.1]) == [2, 1, 2, 4]
