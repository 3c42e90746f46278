"""`arena phase close|publish` (organizers): close a phase now (carrying its chosen submissions
into the final that follows it), and publish a closed phase's results — its board and every
owner's scores, withheld until then when the phase hides scores or its test data is secret."""

from __future__ import annotations

import typer

from starting_kit.commands.remote_client import ArenaClient, RemoteError, console, load_credentials

SERVER = typer.Option(None, "--server", envvar="ARENA_SERVER", help="Server URL.")
TOKEN = typer.Option(None, "--token", envvar="ARENA_TOKEN", help="API token.")
PHASE = typer.Argument(..., help="Phase id (`arena phases --all` lists them).")
phase_app = typer.Typer(help="Close a phase, publish its results (organizers).",
                        no_args_is_help=True)


def _post(server: str | None, token: str | None, url: str) -> dict:
    try:
        return ArenaClient.connect(*load_credentials(server, token)).call("POST", url).json()
    except RemoteError as exc:
        console.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(1) from exc


@phase_app.command("close")
def close_command(phase: int = PHASE, server: str | None = SERVER,
                  token: str | None = TOKEN) -> None:
    """Close the phase now; its chosen entries enter the phases that carry from it."""
    answer = _post(server, token, f"/api/v1/phases/{phase}/close")
    carried = sum(len(ids) for ids in answer.get("carried", {}).values())
    typer.echo(f"phase {phase}: closed; {carried} submission(s) carried")


@phase_app.command("publish")
def publish_command(phase: int = PHASE, server: str | None = SERVER,
                    token: str | None = TOKEN) -> None:
    """Reveal a closed phase's board and its owners' scores (audited; cannot be undone)."""
    answer = _post(server, token, f"/api/v1/phases/{phase}/publish")
    typer.echo(f"phase {phase}: results published at {answer['published_at']}")


def register(app: typer.Typer) -> None:
    """Mount `arena phase` on the `arena` CLI."""
    app.add_typer(phase_app, name="phase")
