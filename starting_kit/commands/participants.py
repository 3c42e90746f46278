"""`arena join` (a participant asks to take part) and `arena participants list|approve|deny|mode`
(organizers decide): a competition is open to all, or needs the organizers' approval."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

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


def _call(client: ArenaClient, method: str, url: str, **kwargs: Any) -> Any:
    """The decoded JSON answer; on an error, say it and exit 1."""
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
    rows = _call(client, "GET", f"/api/v1/competitions/{comp_id}/participants")
    if not rows:
        typer.echo(f"competition {competition}: nobody has asked to take part yet")
        return
    table = Table("user id", "username", "status", "asked", title=f"Participants of "
                  f"{competition} (approve or deny by username)")
    for row in rows:
        table.add_row(str(row["user_id"]), row["username"], row["status"],
                      str(row["requested_at"]).replace("T", " ")[:16])
    console.print(table)


def _user_id(client: ArenaClient, comp_id: int, who: str) -> int:
    """The user id of `who` (a username, or a user id) among the competition's requests."""
    rows = _call(client, "GET", f"/api/v1/competitions/{comp_id}/participants")
    for row in rows:
        if row["username"] == who:
            return int(row["user_id"])
    if who.isdigit():
        return int(who)
    names = ", ".join(sorted(r["username"] for r in rows)) or "nobody"
    console.print(f"[bold red]error:[/] {who!r} has not asked to take part in this "
                  f"competition (asked: {names}); they run `arena join COMPETITION` first",
                  markup=True, highlight=False)
    raise typer.Exit(1)


def _decide(competition: str, who: str, verdict: str, server: str | None,
            token: str | None) -> None:
    client, comp_id = _connect(server, token, competition)
    user_id = _user_id(client, comp_id, who)
    row = _call(client, "POST",
                f"/api/v1/competitions/{comp_id}/participants/{user_id}/{verdict}")
    typer.echo(f"{row['username']}: {row['status']}")


@participants_app.command("approve")
def approve_command(competition: str = COMPETITION,
                    who: str = typer.Argument(..., help="The participant's username (or id)."),
                    server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """Let a participant submit."""
    _decide(competition, who, "approve", server, token)


@participants_app.command("deny")
def deny_command(competition: str = COMPETITION,
                 who: str = typer.Argument(..., help="The participant's username (or id)."),
                 server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """Refuse a participant: their uploads are refused from now on."""
    _decide(competition, who, "deny", server, token)


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
