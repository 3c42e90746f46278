"""`arena`, the command line of participants and organizers: the composition root of the CLI.

The participant commands (run, zip, data) need only the evaluation core. Platform commands
(serve, worker, demo, submit, ...) plug in through the `arena.commands` entry-point group when the
platform extra is installed, so a participant's install never imports FastAPI, Celery or docker.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import typer
from rich.console import Console

app = typer.Typer(
    help="MetaDL Arena: few-shot image classification competitions.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
console = Console(stderr=True)

PROTOCOLS = ["cross-domain", "fixed", "meta-dataset", "within-domain", "id-ood", "fewstab"]


@app.command("run")
def run_command(
    submission: Path = typer.Argument(
        ..., exists=True, file_okay=False, help="Submission folder with model.py."
    ),
    data: Path = typer.Option(
        ..., "--data", exists=True, file_okay=False, help="Meta-Album collection folder."
    ),
    output: Path = typer.Option(
        Path("arena_output"), "--output", help="Where results are written."
    ),
    protocol: str = typer.Option("cross-domain", help=f"One of: {', '.join(PROTOCOLS)}."),
    tasks_per_dataset: int | None = typer.Option(None, help="Test tasks per test dataset."),
    seed: int = typer.Option(0, help="Run seed."),
    phase_seed: int = typer.Option(0, help="Phase seed (the platform's phase setting)."),
    time_limit: float | None = typer.Option(
        None, "--time-limit", help="Wall-clock limit in seconds."
    ),
    threads: int = typer.Option(
        1, help="CPU threads for the submission (the platform pins it too)."
    ),
    cache: Path | None = typer.Option(
        None, help="Compiled-dataset cache (default ~/.cache/metadl-arena)."
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bars."),
) -> None:
    """Meta-train and meta-test a submission locally, exactly as the platform scores it."""
    from submission_api.protocols import ProtocolParams
    from submission_api.runner.local import run_local

    if protocol not in PROTOCOLS:
        raise typer.BadParameter(
            f"got {protocol!r}; expected one of {', '.join(PROTOCOLS)}", param_hint="--protocol"
        )
    overrides = {"tasks_per_dataset": tasks_per_dataset} if tasks_per_dataset else {}
    params = ProtocolParams.from_dict({"name": protocol, "split_seed": phase_seed, **overrides})
    try:
        result = run_local(
            submission,
            data,
            output,
            protocol=params,
            seed=seed,
            phase_seed=phase_seed,
            time_limit_s=time_limit,
            threads=threads,
            cache_dir=cache,
            show_progress=not quiet,
        )
    except (ValueError, OSError) as error:  # bad data or parameters: say what and how to fix
        console.print(f"[bold red]error:[/] {error}")
        raise typer.Exit(2) from error
    if result.state != "finished":
        console.print(f"[bold red]{result.state}[/] ({result.reason}): {result.message}")
        raise typer.Exit(1)
    scores = result.scores or {}
    half = scores.get("ci95")
    ci = f" ± {half:.3f} (95% CI)" if half is not None else ""
    console.print(f"[bold green]score {scores['score']:.4f}[/]{ci} over {scores['n_tasks']} tasks")
    console.print(f"results: {output / 'scores.json'}, {output / 'detailed_results.html'}")


@app.command("zip")
def zip_command(
    folder: Path = typer.Argument(..., exists=True, file_okay=False, help="Submission folder."),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="Zip path (default FOLDER.zip)."
    ),
) -> None:
    """Build a submission zip, refusing one the platform would reject."""
    from submission_api.submission_zip import UnsafeZipError, build_submission_zip

    target = output or folder.resolve().with_suffix(".zip")
    try:
        path = build_submission_zip(folder, target)
    except UnsafeZipError as error:
        console.print(f"[bold red]refused:[/] {error}")
        raise typer.Exit(1) from error
    console.print(f"wrote {path} ({path.stat().st_size} bytes)")


def _mount_plugins() -> None:
    from starting_kit.commands.data import app as data_app
    from starting_kit.commands.participants import register as register_participants
    from starting_kit.commands.remote import register as register_remote

    app.add_typer(data_app, name="data", help="Check, import, generate and compile datasets.")
    register_remote(app)
    register_participants(app)
    for plugin in entry_points(group="arena.commands"):
        try:
            plugin.load()(app)
        except ImportError as error:  # the platform extra is not installed
            hint = f"{plugin.name} commands unavailable ({error.name} missing): "
            hint += "pip install 'metadl-arena[platform]'"
            _unavailable.append(hint)


_unavailable: list[str] = []


def main() -> None:
    _mount_plugins()
    app()


if __name__ == "__main__":
    main()
