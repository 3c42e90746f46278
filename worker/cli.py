"""`arena worker`: the worker's command in the `arena` CLI (entry point `arena.commands`)."""

from __future__ import annotations

import typer


def worker_command() -> None:
    """Run a Celery evaluation worker configured by ARENA_WORKER_* variables."""
    from worker.banner import StartupError
    from worker.celery_app import run_worker
    from worker.settings import get_settings

    try:
        run_worker(get_settings())
    except StartupError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc


def register(app: typer.Typer) -> None:
    import celery  # noqa: F401 - fail early (ImportError) when the platform extra is absent

    app.command("worker")(worker_command)
