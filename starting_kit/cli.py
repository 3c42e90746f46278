"""`arena`, the command line of participants and organizers: the composition root of the CLI.

The participant commands (run, zip, data) need only the evaluation core. Platform commands
(serve, worker, demo, submit, ...) plug in through the `arena.commands` entry-point group when the
platform extra is installed, so a participant's install never imports FastAPI, Celery or docker.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import zipfile
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.text import Text

if TYPE_CHECKING:
    from submission_api.protocols import ProtocolParams

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
        ..., exists=True, help="Submission folder with model.py, or the zip `arena zip` built."
    ),
    data: Path = typer.Option(
        ..., "--data", exists=True, file_okay=False, help="Meta-Album collection folder."
    ),
    output: Path = typer.Option(
        Path("arena_output"), "--output", help="Where results are written."
    ),
    protocol: str | None = typer.Option(
        None, help=f"One of: {', '.join(PROTOCOLS)} (default cross-domain, or the file's)."
    ),
    protocol_file: Path | None = typer.Option(
        None, "--protocol-file", exists=True, dir_okay=False,
        help="The phase's published protocol (JSON/YAML: the phase from /api/v1/phases/ID, a "
        "bundle phase, or protocol parameters): evaluate exactly as that phase does.",
    ),
    tasks_per_dataset: int | None = typer.Option(None, help="Test tasks per test dataset."),
    ways: int | None = typer.Option(None, help="N ways (fixed-shape protocols)."),
    shots: int | None = typer.Option(None, help="k shots (fixed-shape protocols)."),
    queries: int | None = typer.Option(None, help="Queries per class (fixed-shape protocols)."),
    metric: str | None = typer.Option(None, help="Ranking metric (id-ood: NovelGen, BaseGen, "
                                      "BaseGen+NovelGen; fewstab: wAcc-A)."),
    aggregation: str | None = typer.Option(
        None, help="Over runs: min_of_run_means (NeurIPS'22) or per_dataset_min "
        "(MetaDL'21); default: the protocol's source's rule."),
    runs: int | None = typer.Option(
        None, min=1, help="Runs, on the same test tasks with participant seeds 0..R-1 "
        "(default 1, or the file's runs_per_submission)."),
    seed: int = typer.Option(0, help="Participant seed (with --runs: of the first run)."),
    phase_seed: int = typer.Option(0, help="Seeds the test tasks (the platform keeps its own "
                                   "secret)."),
    time_limit: float | None = typer.Option(
        None, "--time-limit", help="Wall-clock limit in seconds."
    ),
    threads: int | None = typer.Option(
        None, min=1, help="CPU threads for the submission (the platform pins it too); default: "
        "the phase's cpus with --protocol-file, else this machine's cores."
    ),
    cache: Path | None = typer.Option(
        None, help="Compiled-dataset cache (default ~/.cache/metadl-arena)."
    ),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bars."),
    image: str | None = typer.Option(
        None, help="The phase's sandbox image, to check imports against (default: the phase "
        "file's image, else metadl-arena/sandbox:cpu)."),
    keep_work: bool = typer.Option(
        False, "--keep-work", help="Keep OUTPUT/.work (meta-train view, task plan) for debugging."
    ),
) -> None:
    """Meta-train and meta-test a submission locally, exactly as the platform scores it."""
    from submission_api.protocols import ProtocolParamsError
    from submission_api.protocols.published import (
        compute_local_protocol,
        read_published_protocol,
    )
    from submission_api.runner.local import run_local

    if protocol is not None and protocol not in PROTOCOLS:
        raise typer.BadParameter(
            f"got {protocol!r}; expected one of {', '.join(PROTOCOLS)}", param_hint="--protocol"
        )
    overrides = {"name": protocol, "tasks_per_dataset": tasks_per_dataset, "n_ways": ways,
                 "n_shots": shots, "n_queries": queries, "metric": metric,
                 "aggregation": aggregation}
    try:
        published, file_runs = (read_published_protocol(protocol_file) if protocol_file
                                else ({"name": "cross-domain"}, None))
        params = compute_local_protocol(published, overrides, phase_seed)
    except ProtocolParamsError as error:
        console.print(f"[bold red]error:[/] {error}")
        raise typer.Exit(2) from error
    from starting_kit.commands.phase_file import read_phase_splits

    splits = read_phase_splits(protocol_file) if protocol_file else None
    if splits is not None and not quiet:
        tested = (", ".join(splits["meta-test"]) if "meta-test" in splits
                  else f"{data}'s, the phase keeps its own secret")
        console.print(f"datasets: the phase's (meta-test: {tested}), not {data}'s split")
    submission = _submission_folder(submission)
    from starting_kit.commands.import_check import phase_image, report_missing_imports

    report_missing_imports(submission, image or phase_image(protocol_file), console)
    if threads is None:
        from starting_kit.commands.run_threads import default_threads

        threads, source = default_threads(protocol_file)
        if not quiet:
            console.print(f"threads: {threads} ({source}; set --threads to change)")
    n_runs = runs or file_runs or 1
    results = []
    try:
        for index in range(n_runs):
            target = output if n_runs == 1 else output / f"run-{index}"
            result = run_local(
                submission, data, target, protocol=params, seed=seed + index,
                phase_seed=phase_seed, time_limit_s=time_limit, threads=threads,
                cache_dir=cache, show_progress=not quiet, keep_work=keep_work, splits=splits,
            )
            if result.state != "finished":
                console.print(f"[bold red]{result.state}[/] ({result.reason}): {result.message}")
                raise typer.Exit(1)
            results.append(result.scores or {})
    except (ValueError, OSError) as error:  # bad data or parameters: say what and how to fix
        console.print(f"[bold red]error:[/] {error}")
        raise typer.Exit(2) from error
    if n_runs > 1:
        _report_runs(results, params, output)
        return
    scores = results[0]
    metric = scores.get("metric") or "score"
    interval, n_tasks = _metric_interval(scores, metric)
    ci = (f" (95% CI [{interval[0]:.3f}, {interval[1]:.3f}] of {metric})"
          if interval is not None else "")
    what = "" if metric == "score" else f" ({metric})"
    # the count of the tasks the interval is of (5 FewSTAB-A tasks, not all 10 of the run)
    over = f"{n_tasks} {metric} tasks" if metric != "score" else f"{n_tasks} tasks"
    console.print(f"[bold green]score {scores['score']:.4f}[/]{what}{ci} over {over}")
    console.print(f"results: {output / 'scores.json'}, {output / 'detailed_results.html'}")


def _metric_interval(scores: dict,
                     metric: str) -> tuple[tuple[float, float] | None, int | None]:
    """The bounded 95% interval of the quantity the phase ranks by (NovelGen, wAcc-A, ...), not
    of the mean over every task, and how many tasks it is over; from scores.json's summary."""
    from submission_api.scoring.ranked_tasks import compute_metric_interval, count_metric_tasks

    summary = scores.get("summary")
    if not isinstance(summary, dict):
        return None, scores.get("n_tasks") if metric == "score" else None
    return compute_metric_interval(summary, metric), count_metric_tasks(summary, metric)


def _submission_folder(submission: Path) -> Path:
    """The folder to run: `submission` itself, or the zip participants upload, extracted with
    the platform's own checks into a temporary folder (removed when the process ends). Exits
    with a message saying where model.py was looked for when it is not there."""
    from submission_api.submission_zip import UnsafeZipError, safe_extract

    if submission.is_file():
        if not zipfile.is_zipfile(submission):
            console.print(Text(f"error: {submission} is a file but not a zip; pass the folder "
                               "that holds model.py, or the .zip that `arena zip` built"))
            raise typer.Exit(2)
        tmp = Path(tempfile.mkdtemp(prefix="arena-run-"))
        atexit.register(shutil.rmtree, tmp, ignore_errors=True)
        try:
            folder = safe_extract(submission, tmp)
        except UnsafeZipError as error:
            console.print(Text(f"refused: {error} (the platform would refuse this zip too)"))
            raise typer.Exit(2) from error
        console.print(Text(f"running {submission} as the platform would, extracted to {folder}"))
        return folder
    if not (submission / "model.py").is_file():
        nested = sorted(p.parent for p in submission.glob("*/model.py"))
        hint = (f"; there is one in {nested[0]}: pass that folder" if nested else
                "; the folder you pass must hold model.py (MyMetaLearner and MyLearner)")
        console.print(Text(f"error: model.py is missing: looked for "
                           f"{(submission / 'model.py').resolve()}{hint}"))
        raise typer.Exit(2)
    return submission


def _report_runs(results: list[dict], params: ProtocolParams, output: Path) -> None:
    """Aggregate R local runs as the phase does and write `submission_score.json`."""
    import json

    from submission_api.scoring.aggregate import compute_submission_score
    from submission_api.scoring.summary import read_metric_cells

    cells = [read_metric_cells(r.get("summary") or {}) for r in results]
    total = compute_submission_score(cells, *params.ranking)
    document = {"score": total.score, "metric": total.metric, "aggregation": total.aggregation,
                "per_dataset": total.per_dataset, "run_values": list(total.run_values)}
    output.mkdir(parents=True, exist_ok=True)
    (output / "submission_score.json").write_text(json.dumps(document, indent=2))
    console.print(f"[bold green]score {total.score:.4f}[/] ({total.metric}, {total.aggregation} "
                  f"over {len(results)} runs); runs: "
                  + ", ".join(f"{v:.4f}" for v in total.run_values))
    console.print(f"results: {output / 'submission_score.json'}, {output}/run-*/")


@app.command("zip")
def zip_command(
    folder: Path = typer.Argument(..., exists=True, file_okay=False, help="Submission folder."),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="Zip path (default FOLDER.zip)."
    ),
    image: str | None = typer.Option(
        None, help="The phase's sandbox image, to check imports against (default: the "
        "platform's, metadl-arena/sandbox:cpu)."),
) -> None:
    """Build a submission zip, refusing one the platform would reject; warns of imports the
    phase's sandbox image lacks."""
    from starting_kit.commands.import_check import report_missing_imports
    from submission_api.submission_zip import UnsafeZipError, build_submission_zip

    report_missing_imports(folder, image, console)
    target = output or folder.resolve().with_suffix(".zip")
    try:
        path = build_submission_zip(folder, target)
    except UnsafeZipError as error:
        console.print(f"[bold red]refused:[/] {error}")
        raise typer.Exit(1) from error
    console.print(f"wrote {path} ({path.stat().st_size} bytes)")


def _mount_plugins() -> None:
    from starting_kit.commands.data import app as data_app
    from starting_kit.commands.factsheet import register as register_factsheet
    from starting_kit.commands.participants import register as register_participants
    from starting_kit.commands.phases import register as register_phases
    from starting_kit.commands.pools import register as register_pools
    from starting_kit.commands.remote import register as register_remote

    app.add_typer(data_app, name="data", help="Check, import, generate and compile datasets.")
    register_remote(app)
    register_participants(app)
    register_phases(app)
    register_pools(app)
    register_factsheet(app)
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
