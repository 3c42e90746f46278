"""The reconciler's repairs reach the server's log (issue 21: they were logged at INFO, which
the server's default logging drops, so an operator never saw a run re-sent or expired)."""

from __future__ import annotations

import logging

from test_runs import claim, queued_run

from server.services.reconcile import ReconcilePolicy, reconcile


def test_a_lapsed_lease_repaired_by_the_reconciler_is_logged_as_a_warning(env, caplog):
    _, [(run_id, token, _)], _ = queued_run(env)
    claim(env, run_id, token)
    env.clock.advance(minutes=10)  # the worker died: its lease lapsed
    with (caplog.at_level(logging.WARNING, logger="arena.reconcile"),
          env.db.session(write=True) as session):
        report = reconcile(session, env.clock.now, env.queue, ReconcilePolicy())
    assert report.expired == [run_id]
    [record] = [r for r in caplog.records if r.name == "arena.reconcile"]
    assert record.levelno == logging.WARNING and str(run_id) in record.getMessage()
