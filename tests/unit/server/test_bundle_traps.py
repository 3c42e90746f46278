"""Issue 24, traps 5 and 6: a bundle that meta-tests on a dataset it also meta-trains on is
refused at the meta_test line (unless its protocol splits each dataset); duplicate phase names
point at the repeated name's line; a date without a time zone is echoed as written; with
`--start`, dates keep their zone (or lack of one) and errors show the dates of the file."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from server.bundles import BundleError, parse_bundle
from server.services.bundles import check_train_test_disjoint
from starting_kit.commands.bundle_client import shift_dates, unshift_message

H1, H2 = "a" * 16, "b" * 16
OVERLAP = f"""slug: leak
title: Leak
phases:
  - name: feedback
    protocol: {{name: PROTOCOL}}
    data:
      meta_train: [birds@{H1}, insects@{H2}]
      meta_test:
        - plankton@{"c" * 16}
        - insects@{H2}
"""


def test_meta_testing_on_a_meta_train_dataset_is_refused_at_its_line():
    parsed = parse_bundle(OVERLAP.replace("PROTOCOL", "cross-domain"))
    with pytest.raises(BundleError) as caught:
        check_train_test_disjoint(parsed)
    message = str(caught.value)
    assert "line 10 (phases[0].data.meta_test[1])" in message, message
    assert "insects is in both meta_train and meta_test" in message
    assert "within-domain" in message  # the fix for a phase that means it


def test_within_domain_shares_datasets_by_design():
    check_train_test_disjoint(parse_bundle(OVERLAP.replace("PROTOCOL", "within-domain")))


def test_a_repeated_phase_name_points_at_its_own_line():
    text = "slug: dup\ntitle: D\nphases:\n  - name: feedback\n  - name: final\n" \
           "  - name: feedback\n"
    with pytest.raises(BundleError) as caught:
        parse_bundle(text)
    assert "line 6 (phases[2].name): phase name 'feedback' is already used by phases[0] " \
           "(line 4)" in str(caught.value)


@pytest.mark.parametrize("written", ["2026-12-01T20:39:52", "2026-12-01 20:39:52"])
def test_a_date_without_a_time_zone_is_echoed_as_a_date(written):
    text = f"slug: tz\ntitle: T\nphases:\n  - name: f\n    starts_at: {written}\n"
    with pytest.raises(BundleError) as caught:
        parse_bundle(text)
    message = str(caught.value)
    assert "without a time zone" in message and "datetime.datetime" not in message
    assert "(got 2026-12-01T20:39:52)" in message, message


@pytest.mark.parametrize("written", ["2026-12-01T20:39:52", "2026-12-01 20:39:52"])
def test_start_keeps_a_missing_zone_missing_and_errors_show_the_authors_date(written):
    text = (f"slug: tz\ntitle: T\nphases:\n  - name: f\n    starts_at: {written}\n"
            "    ends_at: 2026-11-01T00:00:00Z\n")
    moved, offset = shift_dates(text, datetime(2031, 1, 1, tzinfo=UTC))
    assert "Z 20:39" not in moved and "starts_at: 2031-01-31T20:39:52\n" in moved, moved
    with pytest.raises(BundleError) as caught:
        parse_bundle(moved)
    shown = unshift_message(str(caught.value), text, offset)
    assert f"got {written} without a time zone" in shown, shown
    assert "2031" not in shown


def test_start_errors_show_the_files_dates_not_the_shifted_ones():
    text = ("slug: tz\ntitle: T\nphases:\n  - name: f\n    starts_at: 2026-12-01 20:39:52 +02:00\n"
            "    ends_at: 2026-11-01T00:00:00Z\n")
    moved, offset = shift_dates(text, datetime(2031, 1, 1, tzinfo=UTC))
    assert "starts_at: 2031-01-31T18:39:52Z" in moved, moved  # +02:00 written in UTC
    with pytest.raises(BundleError) as caught:
        parse_bundle(moved)
    shown = unshift_message(str(caught.value), text, offset)
    assert "ends_at 2026-11-01T00:00:00Z is not after starts_at 2026-12-01 20:39:52 +02:00" \
        in shown, shown
