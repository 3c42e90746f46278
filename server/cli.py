"""The platform's commands in the `arena` CLI (entry point `arena.commands`): serve, reconcile,
demo. Registered only when the platform extra is installed."""

from __future__ import annotations

from pathlib import Path

import typer


def serve_command(
    host: str = typer.Option("127.0.0.1", help="Interface to listen on."),
    port: int = typer.Option(8000, help="Port to listen on."),
    dev: bool = typer.Option(False, "--dev", help="Development only: accept the placeholder "
                             "or short secrets (test tasks are then recomputable by anyone)."),
) -> None:
    """Run the HTTP server configured by ARENA_* variables (database, storage, broker).

    Refuses to start with the placeholder, a missing or a short (< 32 bytes) ARENA_SECRET_KEY
    or ARENA_TEST_SEED_SECRET unless --dev is given."""
    import uvicorn

    from server.app import create_app
    from server.core.config import InsecureSecretsError, Settings
    from server.core.http_bounds import uvicorn_bounds

    settings = Settings(insecure_dev_secrets=True) if dev else Settings()
    try:
        settings.check_secrets()
    except InsecureSecretsError as exc:
        typer.echo(f"arena serve: {exc}", err=True)
        raise typer.Exit(2) from exc
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
    fresh: bool | None = typer.Option(None, "--fresh/--keep", help="Wipe (or keep) an earlier "
                                      "demo's database; asked on a terminal when not given."),
) -> None:
    """Server + worker + a sample competition with two baseline submissions, on one machine."""
    import sys

    from server.demo import DemoOptions, run_demo

    ask = ((lambda q: typer.confirm(q, default=False)) if sys.stdin.isatty() else None)
    options = DemoOptions(data_dir=data_dir.resolve(), port=port, executor=executor,
                          tasks_per_dataset=tasks_per_dataset, exit_when_done=exit_when_done,
                          fresh=fresh, ask=ask)
    raise typer.Exit(run_demo(options))


def register(app: typer.Typer) -> None:
    import fastapi  # noqa: F401 - fail early (ImportError) when the platform extra is absent

    app.command("serve")(serve_command)
    app.command("reconcile")(reconcile_command)
    app.command("demo")(demo_command)
