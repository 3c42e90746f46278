"""`arena user create|list|revoke`: organizers manage accounts from the command line (the JSON
API's /api/v1/users). `create` prints the new token once, with the exact `arena login` line to
send the participant; `revoke` deactivates an account and deletes its tokens."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from starting_kit.commands.remote_client import ArenaClient, RemoteError, console, load_credentials

SERVER = typer.Option(None, "--server", envvar="ARENA_SERVER", help="Server URL.")
TOKEN = typer.Option(None, "--token", envvar="ARENA_TOKEN", help="Your (organizer's) token.")
user_app = typer.Typer(help="Create, list and revoke accounts (organizers: participants; "
                       "admins: any role).", no_args_is_help=True)


def _connect(server: str | None, token: str | None) -> tuple[ArenaClient, str]:
    server, token = load_credentials(server, token)
    return ArenaClient.connect(server, token), server


def _fail(exc: RemoteError) -> typer.Exit:
    console.print(Text.assemble(("error: ", "bold red"), str(exc)), soft_wrap=True)
    return typer.Exit(1)


@user_app.command("create")
def create(username: str = typer.Argument(..., help="Letters, digits, '_', '.', '-'."),
           role: str = typer.Option("participant", help="participant, organizer or admin."),
           email: str | None = typer.Option(None, help="Contact address (optional)."),
           server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """Create an account and print its token once, with the line to send its owner."""
    try:
        client, url = _connect(server, token)
        created = client.post("/api/v1/users", json={"username": username, "role": role,
                                                     "email": email, "issue_token": True})
    except RemoteError as exc:
        raise _fail(exc) from exc
    console.print(Text(f"created {created['role']} {created['username']} (id {created['id']})."
                       " Send them this line (the token is shown only now):"))
    typer.echo(f"arena login --server {url} --token {created['token']}")


@user_app.command("list")
def list_users(role: str | None = typer.Option(None, help="Only this role."),
               server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """The accounts you manage: id, name, role, active or revoked, tokens held."""
    try:
        client, _url = _connect(server, token)
        rows = client.get_all("/api/v1/users", params={"role": role} if role else {})
    except RemoteError as exc:
        raise _fail(exc) from exc
    table = Table(title=f"{len(rows)} account(s)")
    for column in ("id", "username", "role", "status", "tokens", "created"):
        table.add_column(column, justify="right" if column in ("id", "tokens") else "left")
    for row in rows:
        table.add_row(Text(str(row["id"])), Text(row["username"]), Text(row["role"]),
                      Text("active", "green") if row["is_active"] else Text("revoked", "red"),
                      Text(str(row["tokens"])), Text(row["created_at"][:16].replace("T", " ")))
    Console().print(table)


@user_app.command("revoke")
def revoke(username: str = typer.Argument(..., help="The account to revoke."),
           server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """Deactivate an account and delete every token it holds (its submissions stay)."""
    try:
        client, _url = _connect(server, token)
        match = [u for u in client.get_all("/api/v1/users") if u["username"] == username]
        if not match:
            raise RemoteError(f"no account {username!r} among those you manage; "
                              "`arena user list` shows them")
        done = client.post(f"/api/v1/users/{match[0]['id']}/revoke")
    except RemoteError as exc:
        raise _fail(exc) from exc
    console.print(Text(f"revoked {done['username']}: the account is inactive and its tokens "
                       "no longer work"))
