"""Worker log lines carry their structured fields, so a platform fault says why."""

from __future__ import annotations

import logging

from worker.log_format import EventFormatter


def test_extra_fields_follow_the_event_name():
    record = logging.makeLogRecord({"msg": "run.platform_fault", "levelname": "WARNING",
                                    "name": "worker", "run_id": 7, "error": "disk full"})
    line = EventFormatter("%(levelname)s %(message)s").format(record)
    assert line == "WARNING run.platform_fault error='disk full' run_id=7"
