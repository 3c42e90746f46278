"""`arena worker`: the worker's command in the `arena` CLI (entry point `arena.commands`)."""

from __future__ import annotations

import typer


def worker_command() -> None:
    """Run a Celery evaluation worker configured by ARENA_WORKER_* variables."""
    from worker.celery_app import run_worker
    from worker.settings import get_settings

    run_worker(get_settings())


def register(app: typer.Typer) -> None:
    import celery  # noqa: F401 - fail early (ImportError) when the platform extra is absent

    app.command("worker")(worker_command)
