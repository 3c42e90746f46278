"""`arena join` (a participant asks to take part) and `arena participants list|approve|deny|mode`
(organizers decide): a competition is open to all, or needs the organizers' approval."""

from __future__ import annotations

import typer

from starting_kit.commands.remote_client import ArenaClient, RemoteError, console, load_credentials

SERVER = typer.Option(None, "--server", envvar="ARENA_SERVER", help="Server URL.")
TOKEN = typer.Option(None, "--token", envvar="ARENA_TOKEN", help="API token.")
COMPETITION = typer.Argument(..., help="Competition slug or id.")
participants_app = typer.Typer(help="Who may submit to a competition (organizers).",
                               no_args_is_help=True)


def _connect(server: str | None, token: str | None, ref: str) -> tuple[ArenaClient, int]:
    """A client and the competition's id (from its slug or id)."""
    try:
        client = ArenaClient.connect(*load_credentials(server, token))
        return client, int(client.get(f"/api/v1/competitions/{ref}")["id"])
    except RemoteError as exc:
        console.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(1) from exc


def _call(client: ArenaClient, method: str, url: str, **kwargs) -> object:
    try:
        return client.call(method, url, **kwargs).json()
    except RemoteError as exc:
        console.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(1) from exc


def join_command(competition: str = COMPETITION,
                 accept_terms: bool = typer.Option(
                     False, "--accept-terms",
                     help="Accept the competition's terms (read them on its page first)."),
                 server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """Ask to take part in a competition (granted at once when it is open to all)."""
    client, comp_id = _connect(server, token, competition)
    answer = _call(client, "POST", f"/api/v1/competitions/{comp_id}/participation",
                   json={"accept_terms": accept_terms})
    typer.echo(f"competition {competition}: {answer['status']} ({answer['mode']})")


@participants_app.command("list")
def list_command(competition: str = COMPETITION, server: str | None = SERVER,
                 token: str | None = TOKEN) -> None:
    """Requests and decisions, pending first."""
    client, comp_id = _connect(server, token, competition)
    for row in _call(client, "GET", f"/api/v1/competitions/{comp_id}/participants"):
        typer.echo(f"{row['user_id']}\t{row['username']}\t{row['status']}\t{row['requested_at']}")


def _decide(competition: str, user_id: int, verdict: str, server: str | None,
            token: str | None) -> None:
    client, comp_id = _connect(server, token, competition)
    row = _call(client, "POST",
                f"/api/v1/competitions/{comp_id}/participants/{user_id}/{verdict}")
    typer.echo(f"{row['username']}: {row['status']}")


@participants_app.command("approve")
def approve_command(competition: str = COMPETITION,
                    user_id: int = typer.Argument(..., help="The participant's user id."),
                    server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """Let a participant submit."""
    _decide(competition, user_id, "approve", server, token)


@participants_app.command("deny")
def deny_command(competition: str = COMPETITION,
                 user_id: int = typer.Argument(..., help="The participant's user id."),
                 server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """Refuse a participant: their uploads are refused from now on."""
    _decide(competition, user_id, "deny", server, token)


@participants_app.command("mode")
def mode_command(competition: str = COMPETITION,
                 mode: str = typer.Argument(..., help="open or approval"),
                 server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """Open the competition to all, or require your approval."""
    client, comp_id = _connect(server, token, competition)
    answer = _call(client, "PUT", f"/api/v1/competitions/{comp_id}/participation/mode",
                   json={"mode": mode})
    typer.echo(f"competition {competition}: {answer['mode']}")


def register(app: typer.Typer) -> None:
    """Mount `arena join` and `arena participants` on the `arena` CLI."""
    app.command("join")(join_command)
    app.add_typer(participants_app, name="participants")
