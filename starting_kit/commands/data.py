"""`arena data ...`: check, import, generate, convert and compile Meta-Album data.

Thin wrappers over `submission_api.data` and the sample-data generators; they only parse
arguments and print.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from submission_api.data import (
    DEFAULT_MIN_IMAGES_PER_CLASS,
    DataProblemsError,
    Problem,
    check_path,
    import_dataset,
    load_collection,
)

app = typer.Typer(help="Check, import, generate and compile Meta-Album datasets.",
                  no_args_is_help=True)


def _console() -> Console:
    return Console()


def _print_problems(console: Console, problems: list[Problem]) -> None:
    table = Table("where", "problem", "fix", title=f"{len(problems)} problem(s)",
                  show_lines=True)
    for p in problems:
        table.add_row(p.where, p.what, p.fix)
    console.print(table)


@app.command()
def check(path: Path = typer.Argument(..., help="Dataset folder, dataset zip or collection."),
          min_images_per_class: int = typer.Option(
              DEFAULT_MIN_IMAGES_PER_CLASS, help="Smallest usable class (shots + queries).")
          ) -> None:
    """Print every problem of a dataset, zip or collection with its fix; exit 1 if any."""
    console = _console()
    problems = check_path(path, min_images_per_class)
    if problems:
        _print_problems(console, problems)
        raise typer.Exit(1)
    console.print(f"[green]{path}: no problems found.[/green]")


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
def digits(out: Path = typer.Argument(..., help="Folder to write the dataset into.")) -> None:
    """Convert scikit-learn's bundled digits into a Meta-Album dataset (no download)."""
    from starting_kit.digits import convert_digits

    _console().print(f"[green]Wrote {convert_digits(out)}[/green]")


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
