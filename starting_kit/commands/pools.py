"""`arena pool create|list|show|token|revoke|attach` (organizers): worker pools of a competition,
served by workers on the organizer's own hosts (issue 37). A pool credential is printed once,
with a warning: the server keeps only its hash. Every refusal says what to do next; the calls
are the public JSON API's (/api/v1/competitions/{id}/pools, /api/v1/pools/{id}, ...)."""

from __future__ import annotations

from typing import Any

import httpx
import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from starting_kit.commands.remote_client import (
    ArenaClient,
    RemoteError,
    console,
    explain,
    load_credentials,
)

SERVER = typer.Option(None, "--server", envvar="ARENA_SERVER", help="Server URL.")
TOKEN = typer.Option(None, "--token", envvar="ARENA_TOKEN", help="Your (organizer's) token.")
POOL = typer.Argument(..., help="Pool id (`arena pool list COMPETITION`).")
pool_app = typer.Typer(help="Worker pools: your own hosts evaluating your competition's runs "
                       "(organizers).", no_args_is_help=True)

STORE_WARNING = ("This pool credential is shown only now: the server keeps only its hash. Store "
                 "it in a secret store or a root-only file on the worker host; anyone holding "
                 "it can take this pool's jobs (your competition's test data and participants' "
                 "code). Lost or leaked: `arena pool token {pool}` for a new one, then `arena "
                 "pool revoke {pool} CREDENTIAL_ID` for the old.")


def what_to_do(status: int, about: str, said: dict[int, str] | None = None) -> str:
    """A sentence for a refusal of a pool call: who may do it and what to run instead
    (`said`: the call's own sentence for a status)."""
    return (said or {}).get(status) or {
        401: "the server refused your token: log in again with `arena login --server URL "
             "--token TOKEN` (a pool credential `arena_pool_...` is for `arena worker`, not "
             "for these commands)",
        403: f"only the organizers of the competition (or an admin) manage {about}; log in "
             "with an organizer's token, or ask an organizer to add you",
        404: f"{about} does not exist or is not yours: check the id with `arena pool list "
             "COMPETITION` (or `arena phases --all` for phase ids)",
        409: f"{about} conflicts with what is there now; `arena pool list COMPETITION` "
             "shows the pools",
    }.get(status, "")


class _Pools:
    """One connection and the pool calls; each refusal becomes a RemoteError in words."""

    def __init__(self, server: str | None, token: str | None) -> None:
        self.server, secret = load_credentials(server, token)
        self.client = ArenaClient.connect(self.server, secret)

    def call(self, method: str, url: str, about: str, said: dict[int, str] | None = None,
             **kwargs: Any) -> Any:
        try:
            response = self.client.http.request(method, url, headers=self.client.headers,
                                                **kwargs)
        except httpx.TransportError as exc:
            raise RemoteError(f"cannot reach the server at {self.server} ({exc}); is it up, "
                              "and is --server right?") from exc
        if response.status_code >= 400:
            sentence = what_to_do(response.status_code, about, said)
            detail = explain(response)
            raise RemoteError(f"{sentence}\n  (server: {detail})" if sentence else detail)
        return response.json() if response.content else None

    def competition_id(self, ref: str) -> int:
        """The id of a competition given by slug or id."""
        return int(self.call("GET", f"/api/v1/competitions/{ref}",
                             f"competition {ref!r}")["id"])


def _fail(exc: RemoteError) -> typer.Exit:
    console.print(Text.assemble(("error: ", "bold red"), str(exc)), soft_wrap=True)
    return typer.Exit(1)


def _print_token(pool_id: int, token: str, server: str) -> None:
    """The credential alone on stdout (for a script to capture), the warning and the worker
    line on stderr."""
    console.print(Text(STORE_WARNING.format(pool=pool_id), style="bold yellow"), soft_wrap=True)
    typer.echo(token)
    console.print(Text("Start a worker with it on your GPU host (see the docs, 'Bring your own "
                       "workers'):\n  ARENA_WORKER_SERVER_URL=" + server
                       + " arena worker --pool-token " + token[:15] + "..."), soft_wrap=True)


@pool_app.command("create")
def create_command(competition: str = typer.Argument(..., help="Competition slug or id."),
                   name: str = typer.Argument(..., help="The pool's name (unique in the "
                                              "competition), e.g. lab-gpus."),
                   server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """Create a worker pool in your competition and print its first credential once."""
    try:
        pools = _Pools(server, token)
        comp_id = pools.competition_id(competition)
        made = pools.call("POST", f"/api/v1/competitions/{comp_id}/pools",
                          f"the pools of competition {competition}",
                          said={409: f"competition {competition} already has a pool named "
                                f"{name!r}: choose another name, or use that pool (`arena "
                                f"pool list {competition}`)"}, json={"name": name})
    except RemoteError as exc:
        raise _fail(exc) from exc
    pool = made["pool"]
    console.print(Text(f"created pool {pool['name']} (id {pool['id']}) in competition "
                       f"{competition}; attach a phase with `arena pool attach PHASE "
                       f"{pool['id']}`"))
    _print_token(int(pool["id"]), made["token"], pools.server)


@pool_app.command("list")
def list_command(competition: str | None = typer.Argument(
                     None, help="Competition slug or id (admins: omit it for every pool)."),
                 server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """The pools of a competition (or, for an admin, of every competition)."""
    try:
        pools = _Pools(server, token)
        if competition is None:
            rows = pools.call("GET", "/api/v1/admin/pools", "every competition's pools",
                              said={403: "only an admin lists every competition's pools; "
                                         "name yours: `arena pool list COMPETITION`"})
        else:
            comp_id = pools.competition_id(competition)
            rows = pools.call("GET", f"/api/v1/competitions/{comp_id}/pools",
                              f"the pools of competition {competition}")
    except RemoteError as exc:
        raise _fail(exc) from exc
    if not rows:
        typer.echo("no pool yet; create one with `arena pool create COMPETITION NAME`")
        return
    table = Table(title=f"{len(rows)} pool(s)")
    for column in ("id", "name", "competition", "created"):
        table.add_column(column)
    for row in rows:
        where = row.get("competition_slug") or competition or ""
        table.add_row(str(row["id"]), Text(row["name"]),
                      Text(f"{where} (id {row['competition_id']})"),
                      str(row.get("created_at", ""))[:16].replace("T", " "))
    Console().print(table)


def _when(moment: str | None) -> str:
    """`2030-01-15 12:00` from the API's ISO time (UTC), or ''."""
    return str(moment or "")[:16].replace("T", " ")


def _ago(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{int(seconds)} s" if seconds < 120 else f"{int(seconds // 60)} min"


@pool_app.command("show")
def show_command(pool: int = POOL, server: str | None = SERVER,
                 token: str | None = TOKEN) -> None:
    """A pool's workers (host, GPUs, images, last heartbeat, current run, health), its queue
    and wait times, its phases and its credentials (prefixes only)."""
    try:
        detail = _Pools(server, token).call("GET", f"/api/v1/pools/{pool}", f"pool {pool}")
    except RemoteError as exc:
        raise _fail(exc) from exc
    out = Console()
    queue = detail.get("queue") or {}
    phases = ", ".join(f"{p['name']} (id {p['id']})" for p in detail.get("phases") or [])
    phases = phases or f"none (attach one with `arena pool attach PHASE {pool}`)"
    out.print(Text(f"pool {detail['name']} (id {detail['id']}) · phases: {phases}"))
    out.print(Text(f"queue: {queue.get('queued', 0)} run(s) waiting · oldest waits "
                   f"{_ago(queue.get('oldest_wait_s'))} · median wait (last 50 claims) "
                   f"{_ago(queue.get('median_wait_s'))}"))
    workers = Table(title="workers")
    for column in ("name", "host", "GPUs", "images", "last heartbeat", "current run", "health"):
        workers.add_column(column)
    for w in detail.get("workers") or []:
        health = w.get("health") or ("unhealthy" if w.get("unhealthy") else "")
        workers.add_row(Text(w["name"]), Text(w.get("host") or "-"),
                        Text(", ".join(w.get("gpus") or []) or "-"),
                        Text(", ".join(w.get("images") or []) or "-"),
                        Text(_when(w.get("last_seen_at")) or "-"),
                        Text(str(w.get("current_run_id") or "-")),
                        Text(health, "green" if health == "live" else "red"))
    if detail.get("workers"):
        out.print(workers)
    else:
        out.print("no worker has called in yet: start one with `arena worker --pool-token ...`")
    creds = Table(title="credentials")
    for column in ("id", "prefix", "created", "last used", "status"):
        creds.add_column(column)
    for c in detail.get("credentials") or []:
        creds.add_row(str(c["id"]), c["prefix"] + "...", _when(c["created_at"]),
                      _when(c.get("last_used_at")) or "never",
                      Text("revoked", "red") if c.get("revoked_at") else Text("live", "green"))
    out.print(creds)


@pool_app.command("token")
def token_command(pool: int = POOL, server: str | None = SERVER,
                  token: str | None = TOKEN) -> None:
    """Issue another credential for the pool (e.g. one per host, or to replace a leaked one);
    printed once."""
    try:
        pools = _Pools(server, token)
        made = pools.call("POST", f"/api/v1/pools/{pool}/tokens", f"pool {pool}")
    except RemoteError as exc:
        raise _fail(exc) from exc
    console.print(Text(f"credential {made['id']} ({made['prefix']}...) issued for pool {pool}"))
    _print_token(pool, made["token"], pools.server)


@pool_app.command("revoke")
def revoke_command(pool: int = POOL,
                   credential: int = typer.Argument(..., help="Credential id (`arena pool "
                                                    "show POOL`)."),
                   server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """Revoke a credential: every worker using it is refused at its next call and stops."""
    try:
        _Pools(server, token).call(
            "POST", f"/api/v1/pools/{pool}/tokens/{credential}/revoke",
            f"credential {credential} of pool {pool}",
            said={404: f"credential {credential} of pool {pool} does not exist or is not yours: "
                       f"`arena pool show {pool}` lists the pool's credentials"})
    except RemoteError as exc:
        raise _fail(exc) from exc
    typer.echo(f"credential {credential} of pool {pool} revoked: workers holding it are "
               "refused at their next call")


@pool_app.command("attach")
def attach_command(phase: int = typer.Argument(..., help="Phase id (`arena phases --all`)."),
                   pool: int | None = typer.Argument(None, help="Pool id; omit with --detach."),
                   detach: bool = typer.Option(False, "--detach", help="Give the phase back to "
                                               "the platform's shared workers."),
                   server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """Have a pool's workers evaluate a phase's runs (runs already waiting wait for the pool),
    or with --detach give the phase back to the platform's shared workers."""
    if (pool is None) == (not detach):
        raise typer.BadParameter("give a POOL id, or --detach (not both)")
    about = f"phase {phase}" + (f" or pool {pool}" if pool is not None else "")
    try:
        _Pools(server, token).call("PUT", f"/api/v1/phases/{phase}/pool", about,
                                   json={"pool_id": pool})
    except RemoteError as exc:
        raise _fail(exc) from exc
    typer.echo(f"phase {phase}: served by pool {pool}" if pool is not None else
               f"phase {phase}: served by the platform's shared workers")


def register(app: typer.Typer) -> None:
    """Mount `arena pool` on the `arena` CLI."""
    app.add_typer(pool_app, name="pool")
