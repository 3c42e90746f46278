"""The platform's commands in the `arena` CLI (entry point `arena.commands`): serve, reconcile,
demo. Registered only when the platform extra is installed."""

from __future__ import annotations

from pathlib import Path

import typer


def serve_command(
    host: str = typer.Option("127.0.0.1", help="Interface to listen on."),
    port: int = typer.Option(8000, help="Port to listen on."),
) -> None:
    """Run the HTTP server configured by ARENA_* variables (database, storage, broker)."""
    import uvicorn

    from server.app import create_app
    from server.core.config import Settings
    from server.core.http_bounds import uvicorn_bounds

    settings = Settings()
    uvicorn.run(create_app(settings), host=host, port=port, log_level="info",
                **uvicorn_bounds(settings.max_header_bytes))


def reconcile_command() -> None:
    """One reconciler pass: re-enqueue runs the broker lost, expire lapsed leases."""
    from server.app import reconcile_once
    from server.core.config import Settings

    typer.echo(reconcile_once(Settings()))


def demo_command(
    data_dir: Path = typer.Option(Path("arena-demo"), help="Where the demo keeps everything."),
    port: int = typer.Option(8000, help="Port of the web server."),
    executor: str = typer.Option("auto", help="auto | docker | local (unsandboxed, trusted code)."),
    tasks_per_dataset: int = typer.Option(10, help="Test tasks per test dataset."),
    exit_when_done: bool = typer.Option(False, help="Stop once the demo submissions are scored."),
) -> None:
    """Server + worker + a sample competition with two baseline submissions, on one machine."""
    from server.demo import DemoOptions, run_demo

    options = DemoOptions(data_dir=data_dir.resolve(), port=port, executor=executor,
                          tasks_per_dataset=tasks_per_dataset, exit_when_done=exit_when_done)
    raise typer.Exit(run_demo(options))


def register(app: typer.Typer) -> None:
    import fastapi  # noqa: F401 - fail early (ImportError) when the platform extra is absent

    app.command("serve")(serve_command)
    app.command("reconcile")(reconcile_command)
    app.command("demo")(demo_command)
