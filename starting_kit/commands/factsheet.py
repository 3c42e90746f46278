"""`arena factsheet PHASE answers.yaml` (a finalist answers the phase's fact sheet from a YAML
mapping of question key to answer; without a file it prints the questions as a YAML template)
and `arena factsheet-export PHASE [--csv]` (organizers: every answer, and who is missing)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from starting_kit.commands.remote_client import ArenaClient, RemoteError, console, load_credentials

SERVER = typer.Option(None, "--server", envvar="ARENA_SERVER", help="Server URL.")
TOKEN = typer.Option(None, "--token", envvar="ARENA_TOKEN", help="API token.")


def _client(server: str | None, token: str | None) -> ArenaClient:
    return ArenaClient.connect(*load_credentials(server, token))


def factsheet_command(phase: int = typer.Argument(..., help="Phase id."),
                      answers: Path | None = typer.Argument(
                          None, exists=True, dir_okay=False,
                          help="YAML file: question key -> answer."),
                      server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """Answer a phase's fact sheet from a YAML file (without one: print a template)."""
    import yaml

    try:
        client = _client(server, token)
        if answers is None:
            sheet = client.get(f"/api/v1/phases/{phase}/factsheet")
            for q in sheet["questions"]:
                hint = f" (one of {q['choices']})" if q.get("choices") else f" ({q['kind']})"
                typer.echo(f"# {q['label']}{hint}{' — required' if q['required'] else ''}")
                typer.echo(yaml.safe_dump({q["key"]: sheet["answers"].get(q["key"], "")},
                                          allow_unicode=True).rstrip())
            return
        loaded = yaml.safe_load(answers.read_text()) or {}
        if not isinstance(loaded, dict):
            raise RemoteError(f"{answers} holds a {type(loaded).__name__}; expected a mapping "
                              "of question key to answer (`arena factsheet PHASE` prints one)")
        saved = client.call("PUT", f"/api/v1/phases/{phase}/factsheet",
                            json={"answers": loaded}).json()
    except RemoteError as exc:
        console.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(1) from exc
    typer.echo(f"fact sheet of phase {phase} saved: {len(saved['answers'])} answers")


def export_command(phase: int = typer.Argument(..., help="Phase id."),
                   as_csv: bool = typer.Option(False, "--csv", help="CSV instead of JSON."),
                   server: str | None = SERVER, token: str | None = TOKEN) -> None:
    """Every answer to a phase's fact sheet, and who has not answered (organizers)."""
    try:
        answer = _client(server, token).call(
            "GET", f"/api/v1/phases/{phase}/factsheet/answers",
            params={"format": "csv" if as_csv else "json"})
    except RemoteError as exc:
        console.print(f"[bold red]error:[/] {exc}")
        raise typer.Exit(1) from exc
    typer.echo(answer.text if as_csv else json.dumps(answer.json(), indent=2))


def register(app: typer.Typer) -> None:
    app.command("factsheet")(factsheet_command)
    app.command("factsheet-export")(export_command)
