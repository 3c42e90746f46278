"""`arena data ...`: check, import, generate, convert and compile Meta-Album data.

Thin wrappers over `submission_api.data` and the sample-data generators; they only parse
arguments and print.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from submission_api.data import (
    DEFAULT_MIN_IMAGES_PER_CLASS,
    DataProblemsError,
    Problem,
    check_path,
    import_dataset,
    load_collection,
)
from submission_api.protocols import ProtocolParams
from submission_api.protocols.params import PROTOCOLS

app = typer.Typer(help="Check, import, generate and compile Meta-Album datasets.",
                  no_args_is_help=True)


def _console() -> Console:
    return Console()


def _print_problems(console: Console, problems: list[Problem]) -> None:
    """One row per kind of problem: a problem repeated over many classes or files (292 classes
    "with 20 images, fewer than 21") is one row with its count and a few examples."""
    groups = group_problems(problems)
    table = Table("where", "problem", "fix", title=f"{len(problems)} problem(s)"
                  + (f" of {len(groups)} kinds" if len(groups) < len(problems) else ""),
                  show_lines=True)
    for group in groups:
        first = group[0]
        what = first.what
        if len(group) > 1:
            examples = ", ".join(dict.fromkeys(_quoted(p.what) for p in group[:EXAMPLES]))
            what = (f"{len(group)} times, e.g. {first.what}" + (f" Others: {examples}…"
                                                                 if examples else ""))
        table.add_row(Text(first.where), Text(what), Text(first.fix))
    console.print(table)


EXAMPLES = 4
_QUOTED = re.compile(r"'[^']*'")


def group_problems(problems: list[Problem]) -> list[list[Problem]]:
    """Problems grouped by where (the file) and what with its names and numbers blanked, in
    first-seen order."""
    groups: dict[tuple[str, str, str], list[Problem]] = {}
    for problem in problems:
        shape = re.sub(r"\d+", "#", _QUOTED.sub("'…'", problem.what))
        groups.setdefault((problem.where, shape, problem.fix), []).append(problem)
    return list(groups.values())


def _quoted(text: str) -> str:
    found = _QUOTED.search(text)
    return found.group(0) if found else ""


def min_images_for(params: ProtocolParams) -> tuple[int, str]:
    """The smallest class a protocol can use, and why: support shots plus query images of one
    class (id-ood: inside the held-out share of the class; meta-dataset adapts to the class)."""
    if params.name == "cross-domain":
        return DEFAULT_MIN_IMAGES_PER_CLASS, "1 shot + 20 queries"
    if params.name == "meta-dataset":
        return 2, "1 shot + 1 query (shots and queries adapt to the class)"
    shots, queries = params.n_shots or 1, params.n_queries or 1
    if params.name == "id-ood":
        need = math.ceil((shots + queries) / params.held_out_fraction)
        return need, (f"{shots} shot(s) + {queries} queries within the held-out "
                      f"{params.held_out_fraction:.0%} of each class")
    return shots + queries, f"{shots} shot(s) + {queries} queries"


def _threshold(protocol: str | None, phase: int | None, server: str | None,
               token: str | None, given: int | None) -> tuple[int, str]:
    """The class-size threshold to check against, and a sentence saying where it comes from."""
    if given is not None:
        return given, f"at least {given} images per class (--min-images-per-class)"
    if phase is not None:
        from starting_kit.commands.remote_client import ArenaClient, load_credentials

        server, token = load_credentials(server, token)
        info = ArenaClient.connect(server, token).get(f"/api/v1/phases/{phase}")
        params = ProtocolParams.from_dict(info.get("protocol") or {})
        need, why = min_images_for(params)
        return need, f"phase {phase} ({info['name']}, protocol {params.name}): {why} = {need}"
    params = ProtocolParams.from_dict({"name": protocol or "cross-domain"})
    need, why = min_images_for(params)
    named = "" if protocol else " (the default; pass --protocol or --phase)"
    return need, f"protocol {params.name}{named}: {why} = {need} images per class"


@app.command()
def check(path: Path = typer.Argument(..., help="Dataset folder, dataset zip or collection."),
          protocol: str | None = typer.Option(
              None, help=f"Check against this protocol: {', '.join(PROTOCOLS)}."),
          phase: int | None = typer.Option(
              None, help="Check against a phase's protocol (needs `arena login`)."),
          min_images_per_class: int | None = typer.Option(
              None, help="Smallest usable class, overriding the protocol's (shots + queries)."),
          server: str | None = typer.Option(None, "--server", envvar="ARENA_SERVER"),
          token: str | None = typer.Option(None, "--token", envvar="ARENA_TOKEN")) -> None:
    """Print every problem of a dataset, zip or collection with its fix; exit 1 if any."""
    console = _console()
    if protocol is not None and protocol not in PROTOCOLS:
        raise typer.BadParameter(f"got {protocol!r}; expected one of {', '.join(PROTOCOLS)}",
                                 param_hint="--protocol")
    try:
        need, why = _threshold(protocol, phase, server, token, min_images_per_class)
    except Exception as exc:  # noqa: BLE001 - RemoteError or bad protocol: say it, no traceback
        console.print(Text.assemble(("error: ", "bold red"), str(exc)))
        raise typer.Exit(2) from exc
    console.print(Text(f"checking against {why}"))
    problems = check_path(path, need)
    if problems:
        _print_problems(console, problems)
        raise typer.Exit(1)
    console.print(Text(f"{path}: no problems found.", style="green"))


@app.command("import")
def import_(source: Path = typer.Argument(..., help="Meta-Album dataset zip or folder."),
            collection: Path = typer.Option(..., "--collection", help="Collection folder."),
            split: str | None = typer.Option(
                None, help="Add it to meta-train, meta-valid or meta-test."),
            name: str | None = typer.Option(None, help="Folder name in the collection."),
            min_images_per_class: int = typer.Option(DEFAULT_MIN_IMAGES_PER_CLASS)) -> None:
    """Import a dataset into a collection after checking it (nothing is copied if it fails)."""
    console = _console()
    try:
        dest = import_dataset(source, collection, split, name, min_images_per_class)
    except DataProblemsError as exc:
        console.print(f"[red]{source} was not imported.[/red]")
        _print_problems(console, exc.problems)
        raise typer.Exit(1) from exc
    except (ValueError, FileExistsError, FileNotFoundError) as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from exc
    console.print(f"[green]Imported {dest}[/green]" + (f" into {split}" if split else ""))


@app.command()
def generate(out: Path = typer.Argument(..., help="Collection folder to write."),
             seed: int = typer.Option(0), classes: int = typer.Option(20),
             images: int = typer.Option(40, help="Images per class."),
             image_format: str = typer.Option("jpeg", "--format", help="jpeg or png.")) -> None:
    """Write the synthetic sample collection: 3 meta-train and 2 meta-test domains, plus
    "spurious" (per-image attributes, for fewstab) and "scripts" (34+ classes, for
    within-domain), which are in no split."""
    from starting_kit.sample_data import generate_collection

    generate_collection(out, seed=seed, n_classes=classes, n_images=images,
                        image_format=image_format)
    _console().print(f"[green]Wrote the sample collection to {out}[/green]")


@app.command()
def digits(out: Path = typer.Argument(..., help="The dataset folder to write (its name is "
                                      "the dataset's).")) -> None:
    """Convert scikit-learn's bundled digits into a Meta-Album dataset in OUT (no download)."""
    from starting_kit.digits import convert_digits

    out = out.resolve()
    _console().print(f"[green]Wrote {convert_digits(out.parent, name=out.name)}[/green]")


@app.command("compile")
def compile_(collection: Path = typer.Argument(..., help="Collection folder."),
             cache: Path = typer.Option(..., "--cache", help="Compiled cache folder.")) -> None:
    """Compile every dataset of a collection into the cache (unchanged ones are reused)."""
    console = _console()
    try:
        loaded = load_collection(collection, cache)
    except DataProblemsError as exc:
        _print_problems(console, exc.problems)
        raise typer.Exit(1) from exc
    table = Table("dataset", "split", "images", "classes", "content hash")
    split_of = {n: s for s, names in loaded.splits.items() for n in names}
    for name, ds in loaded.datasets.items():
        table.add_row(name, split_of.get(name, "-"), str(len(ds.labels)),
                      str(len(ds.class_names)), ds.content_hash[:16])
    console.print(table)
