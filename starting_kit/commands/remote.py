"""`arena login|phases|submit|status|logs|leaderboard|cancel|select|competition`: the commands; the
HTTP, credentials and bundle handling they call live in `remote_client`. Commands only print."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import typer
from rich.console import Console
from rich.text import Text

from starting_kit.commands.bundle_client import (
    confirm_changes,
    parse_start,
    shift_dates,
    unshift_message,
)
from starting_kit.commands.kit_client import send_kit
from starting_kit.commands.remote_client import (
    ArenaClient,
    RemoteError,
    bundle_request,
    comparison_words,
    console,
    follow,
    load_credentials,
    print_board,
    save_credentials,
    submit,
)
from starting_kit.commands.remote_views import (
    check_phase_accepts,
    phases_table,
    quota_words,
    status_table,
)
from starting_kit.commands.users import user_app
from submission_api.log_text import escape_controls

# ---- commands -------------------------------------------------------------------------------

SERVER = typer.Option(None, "--server", envvar="ARENA_SERVER", help="Server URL.")
TOKEN = typer.Option(None, "--token", envvar="ARENA_TOKEN", help="API token.")
START = typer.Option(None, "--start", help="Move every phase date by one offset so the first "
                     "is this one: 'now' or a date (e.g. to run an example bundle today).")
competition_app = typer.Typer(help="Create, update and show competitions (organizers).",
                              no_args_is_help=True)


def _client(server: str | None, token: str | None) -> ArenaClient:
    return ArenaClient.connect(*load_credentials(server, token))


@contextmanager
def _reported() -> Iterator[None]:
    try:
        yield
    except RemoteError as exc:
        console.print(Text.assemble(("error: ", "bold red"), str(exc)), soft_wrap=True)
        raise typer.Exit(1) from exc


def login_command(server: str = typer.Option(..., "--server", help="Server URL."),
                  token: str = typer.Option(..., "--token", help="Your API token.")) -> None:
    """Check the token against the server and store it (0600) for the other commands."""
    with _reported():
        me = ArenaClient.connect(server, token).get("/api/v1/me")
        path = save_credentials(server, token)
    console.print(f"logged in to {server} as {me['username']} ({me['role']}); saved {path}")


def submit_command(source: Path = typer.Argument(..., exists=True, help="Zip or folder."),
                   phase: int = typer.Option(..., "--phase", help="Phase id (`arena phases`)."),
                   note: str = typer.Option("", help="A note to remember it by."),
                   league: str | None = typer.Option(None, help="League (default: first)."),
                   method: str = typer.Option("", "--method",
                                              help="Method name, shown on the leaderboard."),
                   description: str = typer.Option("", "--description",
                                                   help="A short description of the method."),
                   code_url: str = typer.Option("", "--code-url", help="Link to its code."),
                   wait: bool = typer.Option(True, "--wait/--no-wait", help="Follow to the end."),
                   allow_duplicate: bool = typer.Option(
                       False, "--allow-duplicate",
                       help="Upload a zip identical to an earlier one (it counts again)."),
                   skip_import_check: bool = typer.Option(
                       False, "--skip-import-check",
                       help="Upload even if the phase's sandbox image lacks one of its imports "
                       "(e.g. you know the organizers' image has it)."),
                   server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """Upload a submission (a folder is zipped first), then follow it and print its score.

    The phase and your quota are checked before the upload; a zip importing a module the
    phase's sandbox image lacks is refused, as `arena zip` and `arena run` warn, unless
    --skip-import-check (it would fail with import_error and spend quota); a zip identical to
    one you already submitted to the phase is refused unless --allow-duplicate.
    """
    with _reported():
        client = _client(server, token)
        image = check_phase_accepts(client, phase).get("image")
        earlier = client.get("/api/v1/me/submissions", params={"phase_id": phase})

        def before_upload(path: Path) -> None:
            if not skip_import_check:
                refuse_missing_imports(path, image)
            if not allow_duplicate:
                refuse_duplicate(path, earlier)

        created = submit(client, source, phase, note=note, league=league,
                         method={"method": method, "description": description,
                                 "code_url": code_url},
                         before_upload=before_upload)
        quota = quota_words(client.get(f"/api/v1/phases/{phase}/quota"))
        console.print(Text(f"submission {created['id']} accepted ({created['state']}); "
                           f"quota left: {quota}"))
        if not wait:
            return
        view = follow(client, created["id"])
    if view["state"] != "finished":
        console.print(Text.assemble((view["state"], "bold red"),
                                    f" ({view['reason']}): {view['message']}"))
        raise typer.Exit(1)
    console.print(f"[bold green]score {view['score']:.4f}[/] (worst of {len(view['runs'])} runs)")


def refuse_missing_imports(path: Path, image: str | None) -> None:
    """Raise RemoteError after the same warnings `arena zip` prints when the zip imports a
    module the phase's image lacks: the run would end in import_error and spend quota."""
    from starting_kit.commands.import_check import count_missing_in_zip

    missing = count_missing_in_zip(path, image, console)
    if missing:
        raise RemoteError(f"{missing} import(s) above are missing from the phase's sandbox "
                          "image, so the platform run would fail with import_error and count "
                          "against your quota; nothing was uploaded. Ship them as said above, "
                          "or pass --skip-import-check to upload anyway.")


def refuse_duplicate(path: Path, earlier: list[dict]) -> None:
    """Raise RemoteError when `path` has the bytes of one of `earlier` (same sha256)."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    same = [v for v in earlier if v.get("sha256") == digest]
    if same:
        raise RemoteError(f"this zip is identical to your submission {same[0]['id']} "
                          f"({same[0]['state']}) in this phase; uploading it again would count "
                          "against your quota again. Pass --allow-duplicate to upload it anyway "
                          f"(e.g. to re-run it), or see `arena status {same[0]['id']}`.")


def phases_command(show_all: bool = typer.Option(False, "--all", help="Closed and upcoming "
                                                 "phases too."),
                   server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """The phases you can submit to now (id, competition, closing time, your quota left), and
    why the other open ones are not yours yet (join, accept the terms, await approval)."""
    with _reported():
        client = _client(server, token)
        competitions = client.get_all("/api/v1/competitions")
        entry = {c["id"]: client.get(f"/api/v1/competitions/{c['id']}/participation")
                 for c in competitions
                 if any(p.get("accepting_submissions") for p in c["phases"])}
        blocked = {c["id"]: why_not_yours(c, entry[c["id"]]) for c in competitions
                   if c["id"] in entry and entry[c["id"]]["status"] != "approved"}
        open_ids = [p["id"] for c in competitions if c["id"] not in blocked
                    for p in c["phases"] if p.get("accepting_submissions")]
        quotas = {pid: client.get(f"/api/v1/phases/{pid}/quota") for pid in open_ids}
    shown = competitions if show_all else [c for c in competitions if c["id"] not in blocked]
    Console().print(phases_table(shown, quotas, show_all=show_all))
    for comp in competitions:
        if comp["id"] in blocked:
            console.print(Text(f"not yours yet: {comp['title']} ({comp['slug']}): "
                               f"{blocked[comp['id']]}"))
    if not open_ids:
        console.print("no phase takes submissions from you now; `arena phases --all` shows "
                      "when the next one opens")


def why_not_yours(comp: dict, entry: dict) -> str:
    """Why an open phase of `comp` does not take your submissions, and what to do."""
    join = f"arena join {comp['slug']}" + (" --accept-terms" if entry.get("terms") else "")
    return {"pending": "your request to take part awaits the organizers' approval",
            "denied": "the organizers did not admit you",
            "none": ("accept its terms first (read them on its page): " if entry.get("terms")
                     else "it needs the organizers' approval; ask with ") + f"`{join}`",
            }.get(entry["status"], entry["status"])


def status_command(submission: int | None = typer.Argument(None, help="Submission id."),
                   server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """A table of your submissions (or one): state, score ± CI, rank, when submitted."""
    with _reported():
        client = _client(server, token)
        views = ([client.get(f"/api/v1/submissions/{submission}")] if submission is not None
                 else client.get("/api/v1/me/submissions"))
        phase_ids = sorted({v["phase_id"] for v in views})
        phases = {pid: client.get(f"/api/v1/phases/{pid}") for pid in phase_ids}
        boards = {pid: _board_or_none(client, pid) for pid in phase_ids
                  if any(v["phase_id"] == pid and v["state"] == "finished" for v in views)}
        quotas = {pid: client.get(f"/api/v1/phases/{pid}/quota") for pid in phase_ids
                  if phases[pid].get("accepting_submissions")}
    Console().print(status_table(views, {pid: p["name"] for pid, p in phases.items()}, boards))
    for pid, quota in quotas.items():
        console.print(Text(f"quota in {phases[pid]['name']} ({pid}): {quota_words(quota)}"))
    if submission is not None:
        for line in status_notes(views[0]):
            console.print(Text(line))
    if not views:
        console.print("no submission yet; `arena phases` lists where to submit")


def status_notes(view: dict) -> list[str]:
    """The submission's message (`failed (reason): ...`), and each run's own note the
    submission's does not say, e.g. a run queued again after a platform fault, retried and
    not charged (issue 32.5: it read as the run failing)."""
    reason = f" ({view['reason']})" if view.get("reason") else ""
    lines = [f"{view['state']}{reason}: {view['message']}"] if view.get("message") else []
    for run in view.get("runs") or []:
        if run.get("message") and run["message"] != view.get("message"):
            why = f" ({run['reason']})" if run.get("reason") else ""
            first = str(run["message"]).split("\n\n", 1)[0]
            lines.append(f"run {run.get('index', '?')}: {run['state']}{why}: {first}")
    return lines


def _board_or_none(client: ArenaClient, phase_id: int) -> dict | None:
    """The phase's leaderboard, or None when the organizers hide it (then no ranks)."""
    try:
        return client.get(f"/api/v1/phases/{phase_id}/leaderboard")
    except RemoteError:
        return None


def logs_command(submission: int = typer.Argument(..., help="Submission id."),
                 server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """The logs of each run of a submission of yours."""
    with _reported():
        client = _client(server, token)
        logs = client.get(f"/api/v1/submissions/{submission}/logs")
        # A crash in `fit` or `predict` may leave its traceback only in the run's message (what
        # `arena status` shows): print it beside a log that lacks it.
        failed = {r["id"]: r for r in client.get(f"/api/v1/submissions/{submission}")["runs"]
                  if r.get("message")} if any(r["state"] != "finished"
                                                for r in logs["runs"]) else {}
    for run in logs["runs"]:
        # Participant output: ESC, BEL, CR shown as text, never acted on by the terminal.
        typer.echo(f"===== run {run['index']} ({run['state']}) =====\n"
                   f"{escape_controls(run['log']) or '(the run wrote no log)'}")
        why = failed.get(run["run_id"])
        if why and why["message"].strip() not in run["log"]:
            typer.echo(f"----- why it {run['state']} ({why['reason']}) -----\n"
                       f"{escape_controls(why['message'])}")


def leaderboard_command(phase: int = typer.Option(..., "--phase", help="Phase id."),
                        league: str | None = typer.Option(None, help="League."),
                        csv: bool = typer.Option(False, "--csv", help="Print CSV."),
                        stats: bool = typer.Option(
                            False, "--stats", help="Add each entry's rank range and tied group "
                            "(when the phase shows statistics)."),
                        server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """The leaderboard of a phase."""
    params = {"league": league} if league else {}
    with _reported():
        client = _client(server, token)
        if csv:
            url = f"/api/v1/phases/{phase}/leaderboard"
            typer.echo(client.call("GET", url, params=params | {"format": "csv"}).text)
            return
        print_board(client.get(f"/api/v1/phases/{phase}/leaderboard", params=params),
                    stats=stats)


def compare_command(a: int = typer.Argument(..., help="Submission id A."),
                    b: int = typer.Argument(..., help="Submission id B (same phase)."),
                    server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """A − B over the test tasks both met: mean difference, 95% intervals, significance."""
    with _reported():
        answer = _client(server, token).get(f"/api/v1/submissions/{a}/compare/{b}")
    typer.echo(comparison_words(answer))


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
                 cache: Path | None, start: str | None = None, yes: bool = True,
                 on_scored: str | None = None) -> None:
    with _reported():
        client = _client(server, token)
        body = bundle_request(client, bundle, cache or Path.home() / ".cache" / "metadl-arena")
        written, offset = body["yaml"], timedelta(0)
        if start is not None:
            first = parse_start(start)
            body["yaml"], offset = shift_dates(written, first)
            console.print(Text(f"phase dates moved by {offset.days} days so that the first "
                               f"one is {first:%Y-%m-%d %H:%M} UTC"))
        found = re.search(r"^slug:\s*['\"]?([^'\"\s#]+)", body["yaml"], re.MULTILINE)
        url = ("/api/v1/competitions/bundle" if method == "POST"
               else f"/api/v1/competitions/{found.group(1) if found else ''}/bundle"
               + (f"?on_scored={on_scored}" if on_scored else ""))
        try:
            if method == "PUT" and not confirm_changes(client, url, body, yes, console):
                return
            comp = client.call(method, url, json=body).json()
        except RemoteError as exc:
            if not exc.problems:
                raise
            # file:line: where: what — the form editors and terminals link to the line
            # Dates as the author wrote them, not as --start moved them.
            raise RemoteError("\n".join(
                [f"{bundle}: {len(exc.problems)} problem(s); fix them and run the command "
                 "again:", *(f"  {bundle}:{p['line']}: {p['where']}: "
                             f"{unshift_message(p['message'], written, offset)}"
                             for p in exc.problems)])) from exc
        send_kit(client, bundle, comp["id"], console)
    phases = ", ".join(f"{p['name']} (id {p['id']}, {p['status']})" for p in comp["phases"])
    console.print(Text(f"competition {comp['slug']} (id {comp['id']}): {phases}"))


@competition_app.command("create")
def competition_create(bundle: Path = typer.Argument(..., exists=True, dir_okay=False),
                       cache: Path | None = typer.Option(None, help="Compiled-data cache."),
                       start: str | None = START,
                       server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """Create a competition from a bundle; local collections are compiled and registered."""
    _send_bundle(bundle, "POST", server, token, cache, start)


@competition_app.command("update")
def competition_update(bundle: Path = typer.Argument(..., exists=True, dir_okay=False),
                       cache: Path | None = typer.Option(None, help="Compiled-data cache."),
                       start: str | None = START,
                       yes: bool = typer.Option(False, "--yes", "-y", help="Apply the changes "
                                                "without asking (for scripts)."),
                       rerun: bool = typer.Option(False, "--rerun", help="If the update changes "
                                                  "what a scored phase measures (datasets, "
                                                  "seed, protocol), re-run every entry on the "
                                                  "new settings."),
                       new_phase: bool = typer.Option(False, "--new-phase", help="If it does, "
                                                      "keep the scored phase closed as "
                                                      "'<name> (v<k>)' and open a new one."),
                       server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """Apply a bundle to the competition with the bundle's slug: prints what changes (phase
    status only where the bundle says `status:`, and what it does to existing scores) and asks
    before applying. Changing what a scored phase measures needs --rerun or --new-phase."""
    if rerun and new_phase:
        raise typer.BadParameter("choose one of --rerun and --new-phase")
    _send_bundle(bundle, "PUT", server, token, cache, start, yes,
                 "rerun" if rerun else "new_phase" if new_phase else None)


@competition_app.command("show")
def competition_show(ref: str = typer.Argument(..., help="Slug or id."),
                     server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """A competition's phases as JSON."""
    with _reported():
        comp = _client(server, token).get(f"/api/v1/competitions/{ref}")
    typer.echo(json.dumps(comp, indent=2))


def register(app: typer.Typer) -> None:
    """Mount the remote commands on the `arena` CLI."""
    for name, command in (("login", login_command), ("phases", phases_command),
                          ("submit", submit_command),
                          ("status", status_command), ("logs", logs_command),
                          ("leaderboard", leaderboard_command), ("cancel", cancel_command),
                          ("select", select_command), ("compare", compare_command)):
        app.command(name)(command)
    app.add_typer(competition_app, name="competition")
    app.add_typer(user_app, name="user")
