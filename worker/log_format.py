"""Worker log lines: the dotted event name followed by its structured fields as key=value, so an
operator reading the worker's output sees why (`run.platform_fault error=...`), not only what."""

from __future__ import annotations

import logging

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class EventFormatter(logging.Formatter):
    """`time level logger event key=value ...` with every `extra=` field of the record."""

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = {k: v for k, v in vars(record).items() if k not in _STANDARD}
        return line + "".join(f" {k}={v!r}" for k, v in sorted(fields.items()))


def configure_worker_logging(level: int = logging.INFO) -> None:
    """Install the event formatter on the root logger at INFO (Celery is told not to take it
    over: `keep_logging_through_celery`)."""
    handler = logging.StreamHandler()
    handler.setFormatter(EventFormatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def keep_logging_through_celery() -> None:
    """Make Celery leave logging as `configure_worker_logging` set it, in the main process and
    in every pool child. Without a `setup_logging` receiver Celery configures the root logger
    itself, at the worker's --loglevel (WARNING), in the main process and again in each pool
    child: the runs' INFO lines (`run.claimed`, a successful `run.finished`) were lost
    (issue 32.6). A receiver makes Celery skip its own configuration."""
    from celery.signals import setup_logging

    def configure(**_: object) -> None:
        configure_worker_logging()

    setup_logging.connect(configure, weak=False)
