"""`arena login|submit|status|logs|leaderboard|cancel|select|competition`: the commands; the
HTTP, credentials and bundle handling they call live in `remote_client`. Commands only print."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer

from starting_kit.commands.remote_client import (
    ArenaClient,
    RemoteError,
    bundle_request,
    console,
    follow,
    load_credentials,
    print_board,
    save_credentials,
    submit,
)

# ---- commands -------------------------------------------------------------------------------

SERVER = typer.Option(None, "--server", envvar="ARENA_SERVER", help="Server URL.")
TOKEN = typer.Option(None, "--token", envvar="ARENA_TOKEN", help="API token.")
competition_app = typer.Typer(help="Create, update and show competitions (organizers).",
                              no_args_is_help=True)


def _client(server: str | None, token: str | None) -> ArenaClient:
    return ArenaClient.connect(*load_credentials(server, token))


@contextmanager
def _reported() -> Iterator[None]:
    try:
        yield
    except RemoteError as exc:
        console.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(1) from exc


def login_command(server: str = typer.Option(..., "--server", help="Server URL."),
                  token: str = typer.Option(..., "--token", help="Your API token.")) -> None:
    """Check the token against the server and store it (0600) for the other commands."""
    with _reported():
        me = ArenaClient.connect(server, token).get("/api/v1/me")
        path = save_credentials(server, token)
    console.print(f"logged in to {server} as {me['username']} ({me['role']}); saved {path}")


def submit_command(source: Path = typer.Argument(..., exists=True, help="Zip or folder."),
                   phase: int = typer.Option(..., "--phase", help="Phase id."),
                   note: str = typer.Option("", help="A note to remember it by."),
                   league: str | None = typer.Option(None, help="League (default: first)."),
                   wait: bool = typer.Option(True, "--wait/--no-wait", help="Follow to the end."),
                   server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """Upload a submission (a folder is zipped first), then follow it and print its score."""
    with _reported():
        client = _client(server, token)
        created = submit(client, source, phase, note=note, league=league)
        console.print(f"submission {created['id']} accepted ({created['state']})")
        if not wait:
            return
        view = follow(client, created["id"])
    if view["state"] != "finished":
        console.print(f"[bold red]{view['state']}[/] ({view['reason']}): {view['message']}")
        raise typer.Exit(1)
    console.print(f"[bold green]score {view['score']:.4f}[/] (worst of {len(view['runs'])} runs)")


def status_command(submission: int | None = typer.Argument(None, help="Submission id."),
                   server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """One submission's state, or a list of yours."""
    with _reported():
        client = _client(server, token)
        views = ([client.get(f"/api/v1/submissions/{submission}")] if submission is not None
                 else client.get("/api/v1/me/submissions"))
    for v in views:
        score = "" if v["score"] is None else f" score {v['score']:.4f}"
        why = f" ({v['reason']}: {v['message']})" if v["reason"] else ""
        typer.echo(f"{v['id']}\tphase {v['phase_id']}\t{v['state']}{score}{why}")


def logs_command(submission: int = typer.Argument(..., help="Submission id."),
                 server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """The logs of each run of a submission of yours."""
    with _reported():
        logs = _client(server, token).get(f"/api/v1/submissions/{submission}/logs")
    for run in logs["runs"]:
        typer.echo(f"===== run {run['index']} ({run['state']}) =====\n{run['log']}")


def leaderboard_command(phase: int = typer.Option(..., "--phase", help="Phase id."),
                        league: str | None = typer.Option(None, help="League."),
                        csv: bool = typer.Option(False, "--csv", help="Print CSV."),
                        server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """The leaderboard of a phase."""
    params = {"league": league} if league else {}
    with _reported():
        client = _client(server, token)
        if csv:
            url = f"/api/v1/phases/{phase}/leaderboard"
            typer.echo(client.call("GET", url, params=params | {"format": "csv"}).text)
            return
        print_board(client.get(f"/api/v1/phases/{phase}/leaderboard", params=params))


def cancel_command(submission: int = typer.Argument(..., help="Submission id."),
                   server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """Cancel a submission of yours (running runs stop at their next heartbeat)."""
    with _reported():
        view = _client(server, token).post(f"/api/v1/submissions/{submission}/cancel")
    typer.echo(f"submission {submission}: {view['state']}")


def select_command(submission: int = typer.Argument(..., help="Submission id."),
                   server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """Make a finished submission the one that represents you (and enters the final)."""
    with _reported():
        _client(server, token).post(f"/api/v1/submissions/{submission}/select")
    typer.echo(f"submission {submission} now represents you in its phase")


def _send_bundle(bundle: Path, method: str, server: str | None, token: str | None,
                 cache: Path | None) -> None:
    import yaml

    with _reported():
        client = _client(server, token)
        body = bundle_request(client, bundle, cache or Path.home() / ".cache" / "metadl-arena")
        slug = (yaml.safe_load(body["yaml"]) or {}).get("slug", "")
        url = ("/api/v1/competitions/bundle" if method == "POST"
               else f"/api/v1/competitions/{slug}/bundle")
        comp = client.call(method, url, json=body).json()
    phases = ", ".join(f"{p['name']} (id {p['id']})" for p in comp["phases"])
    console.print(f"competition {comp['slug']} (id {comp['id']}): {phases}")


@competition_app.command("create")
def competition_create(bundle: Path = typer.Argument(..., exists=True, dir_okay=False),
                       cache: Path | None = typer.Option(None, help="Compiled-data cache."),
                       server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """Create a competition from a bundle; local collections are compiled and registered."""
    _send_bundle(bundle, "POST", server, token, cache)


@competition_app.command("update")
def competition_update(bundle: Path = typer.Argument(..., exists=True, dir_okay=False),
                       cache: Path | None = typer.Option(None, help="Compiled-data cache."),
                       server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """Apply a bundle to the competition with the bundle's slug."""
    _send_bundle(bundle, "PUT", server, token, cache)


@competition_app.command("show")
def competition_show(ref: str = typer.Argument(..., help="Slug or id."),
                     server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """A competition's phases as JSON."""
    with _reported():
        comp = _client(server, token).get(f"/api/v1/competitions/{ref}")
    typer.echo(json.dumps(comp, indent=2))


def register(app: typer.Typer) -> None:
    """Mount the remote commands on the `arena` CLI."""
    for name, command in (("login", login_command), ("submit", submit_command),
                          ("status", status_command), ("logs", logs_command),
                          ("leaderboard", leaderboard_command), ("cancel", cancel_command),
                          ("select", select_command)):
        app.command(name)(command)
    app.add_typer(competition_app, name="competition")
