"""`arena worker`: the worker's command in the `arena` CLI (entry point `arena.commands`)."""

from __future__ import annotations

from typing import Annotated

import typer

PoolToken = Annotated[str | None, typer.Option(
    "--pool-token", envvar="ARENA_WORKER_POOL_TOKEN", show_envvar=True,
    help="An organizer pool's credential (arena_pool_...): take only that pool's runs, from the "
         "server over HTTP, with no broker URL. Unset: a shared worker on the Celery broker.")]


def worker_command(pool_token: PoolToken = None) -> None:
    """Run an evaluation worker configured by ARENA_WORKER_* variables: a Celery worker of the
    operator's shared pool, or with --pool-token a worker of an organizer's pool."""
    from worker.banner import StartupError
    from worker.settings import get_settings

    settings = get_settings()
    if pool_token:
        settings = settings.model_copy(update={"pool_token": pool_token})
    try:
        if settings.pool_token:
            from worker.pool_loop import run_pool_worker

            code = run_pool_worker(settings)
            if code:
                raise typer.Exit(code)
            return
        from worker.celery_app import run_worker

        run_worker(settings)
    except StartupError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc


def register(app: typer.Typer) -> None:
    import celery  # noqa: F401 - fail early (ImportError) when the platform extra is absent

    app.command("worker")(worker_command)
