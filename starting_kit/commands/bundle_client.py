"""The local side of `arena competition create|update`: the collections a bundle names are
checked (every dataset name present, else file, line and the closest name), compiled and
registered before the bundle is sent, so a typo costs no upload and prints no traceback.
"""

from __future__ import annotations

import difflib
import re
import tarfile
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starting_kit.commands.remote_client import RemoteError

if TYPE_CHECKING:
    from starting_kit.commands.remote_client import ArenaClient


def register_collection(client: ArenaClient, folder: Path, cache: Path,
                        names: set[str]) -> dict[str, Any]:
    """Compile a local collection and register the datasets a bundle needs; returns
    `{"datasets": {name: hash}, "splits": {...}}` for the bundle request."""
    from submission_api.data import load_collection
    from submission_api.data.metaalbum import read_splits
    from submission_api.data.problems import DataProblemsError

    splits, _ = read_splits(folder)
    wanted = set(names) | {n for group in (splits or {}).values() for n in group}
    try:
        collection = load_collection(folder, cache, only=sorted(wanted))
    except DataProblemsError as exc:
        raise RemoteError(f"the collection {folder} cannot be compiled:\n{exc}") from exc
    hashes = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, dataset in sorted(collection.datasets.items()):
            tar_path = Path(tmp) / f"{name}.tar"
            with tarfile.open(tar_path, "w") as tar:
                for item in sorted(dataset.root.iterdir()):
                    tar.add(item, arcname=item.name)
            row = client.upload("/api/v1/datasets", tar_path, {}, show=False)
            hashes[name] = row["content_hash"]
    return {"datasets": hashes, "splits": collection.splits}


def check_local_datasets(bundle: Path, text: str, paths: dict[str, set[str]]) -> None:
    """Raise RemoteError listing every dataset name that its local collection lacks (file,
    line, the names it has, did you mean), or a collection folder that does not exist."""
    from submission_api.data.metaalbum import list_dataset_dirs

    problems = []
    for rel, names in paths.items():
        folder = (bundle.parent / rel).resolve()
        if not folder.is_dir():
            problems.append((_line_of(text, f"path: {rel}"), f"data.path {rel!r}: no folder "
                             f"{folder}; generate one with `arena data generate {folder}` or "
                             "fix the path (relative to the bundle file)"))
            continue
        present = sorted(d.name for d in list_dataset_dirs(folder))
        for name in sorted(names - set(present)):
            close = difflib.get_close_matches(name, present, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"it has {present}"
            problems.append((_line_of(text, name), f"dataset {name!r} is not in the local "
                             f"collection {folder}; {hint}"))
    if problems:
        raise RemoteError("\n".join([f"{bundle}: {len(problems)} problem(s)",
                                     *(f"  {bundle}:{line}: {what}" for line, what in
                                       sorted(problems))]))


def _line_of(text: str, needle: str) -> int:
    """The 1-based line of the first whole-word occurrence of `needle` (1 when absent)."""
    pattern = re.compile(rf"(?<![\w-]){re.escape(needle)}(?![\w-])")
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern.search(line.split("#", 1)[0]):
            return number
    return 1


# A YAML date: `2031-01-15`, `2031-01-15T09:00:00Z`, `2031-01-15 09:00:00 +02:00`, quoted or not.
DATE = (r"\d{4}-\d\d-\d\d(?:[Tt ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?)?"
        r"(?:\s?(?:Z|z|[+-]\d\d(?::?\d\d)?))?")
DATE_LINE = re.compile(rf"^(?P<key>\s*(?:-\s+)?(?:starts_at|ends_at):[ \t]*)(?P<value>['\"]?"
                       rf"{DATE}['\"]?)", re.MULTILINE)
MESSAGE_DATE = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?")


def shift_dates(text: str, start: datetime) -> tuple[str, timedelta]:
    """The bundle text with every phase date moved by one offset, so that the earliest date
    becomes `start` (durations and the order of phases are kept; comments stay). Returns the
    new text and the offset. A bundle with no dates is returned unchanged."""
    found = [(m, _parse_date(m.group("value").strip("'\""))) for m in DATE_LINE.finditer(text)]
    dates = [d for _m, d in found if d is not None]
    if not dates:
        return text, timedelta(0)
    offset = start - min(dates)

    def moved(match: re.Match) -> str:
        written = match.group("value").strip("'\"")
        value = _parse_date(written)
        if value is None:
            return match.group(0)
        # A date without a time zone stays without one, so the server still says so.
        shape = "%Y-%m-%dT%H:%M:%SZ" if _has_zone(written) else "%Y-%m-%dT%H:%M:%S"
        return match.group("key") + (value + offset).astimezone(UTC).strftime(shape)

    return DATE_LINE.sub(moved, text), offset


def unshift_message(message: str, original: str, offset: timedelta) -> str:
    """A server message about a `--start`-shifted bundle with each shifted date written back
    as the author wrote it in `original` (their file), so the error points at their text."""
    if not offset:
        return message
    written = {}
    for match in DATE_LINE.finditer(original):
        text = match.group("value").strip("'\"")
        value = _parse_date(text)
        if value is not None:
            written[value] = text

    def back(match: re.Match) -> str:
        value = _parse_date(match.group(0))
        return written.get(value - offset, match.group(0)) if value else match.group(0)

    return MESSAGE_DATE.sub(back, message)


def _has_zone(text: str) -> bool:
    parsed = _parse_raw(text)
    return parsed is not None and parsed.tzinfo is not None


def parse_start(value: str) -> datetime:
    """`now`, or a date/time (UTC unless it says otherwise); raises RemoteError otherwise."""
    if value.strip().lower() == "now":
        return datetime.now(UTC).replace(microsecond=0)
    parsed = _parse_date(value)
    if parsed is None:
        raise RemoteError(f"--start got {value!r}; expected 'now' or a date like 2031-01-15 "
                          "or 2031-01-15T09:00:00Z")
    return parsed


def _parse_raw(value: str) -> datetime | None:
    """A date as written (time zone kept, or none); None when it is not a date."""
    value = re.sub(r"\s+(?=[+-]\d\d(?::?\d\d)?$)", "", value.strip())  # YAML's "09:00 +02:00"
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None


def _parse_date(value: str) -> datetime | None:
    """A date, UTC unless it says otherwise; None when it is not a date."""
    parsed = _parse_raw(value)
    if parsed is None:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def confirm_changes(client: ArenaClient, url: str, body: dict, yes: bool, console: Any) -> bool:
    """Print what the update would change (the server's dry run) and ask before applying;
    False when there is nothing to change or the organizer says no."""
    import typer
    from rich.text import Text

    diff = client.call("POST", f"{url.split('?')[0]}/diff", json=body).json()
    lines = [f"  {c['text']}" for c in diff["changes"]]
    lines += [f"  new phase: {name}" for name in diff["added_phases"]]
    lines += [f"  scores: {s['text']}" for s in diff.get("scored", [])]
    if not lines:
        console.print(Text("the bundle changes nothing on the server; nothing was sent"))
        return False
    console.print(Text("\n".join([f"this update changes {len(lines)} thing(s):", *lines])))
    if yes:
        return True
    if not typer.confirm("apply these changes?", default=False):
        console.print(Text("nothing was changed (pass --yes to apply without asking)"))
        return False
    return True

