"""Safe extraction of dataset zips: nothing is written unless every member is safe.

A zip can name absolute paths, climb out with `..`, carry symbolic links, or expand to far more
than it weighs; each is refused before the first byte is written, with every offending member
listed.
"""

from __future__ import annotations

import shutil
import stat
import zipfile
from pathlib import Path, PurePosixPath

from submission_api.data.problems import DataProblemsError, Problem

MAX_UNCOMPRESSED_BYTES = 64 * 2**30
"""The largest Meta-Album dataset (Extended) is a few GiB; 64 GiB bounds a zip bomb."""
MAX_MEMBERS = 2_000_000
"""Meta-Album Extended datasets hold up to ~10^5 images; this bounds a file-count bomb."""


def _member_problems(info: zipfile.ZipInfo, where: str) -> list[Problem]:
    name = info.filename
    pure = PurePosixPath(name.replace("\\", "/"))
    fix = "Re-create the zip with relative paths only (e.g. `zip -r data.zip dataset/`)."
    if pure.is_absolute() or (pure.parts and pure.parts[0].endswith(":")):
        return [Problem(where, f"member {name!r} has an absolute path.", fix)]
    if ".." in pure.parts:
        return [Problem(where, f"member {name!r} climbs out of the folder with '..'.", fix)]
    kind = stat.S_IFMT(info.external_attr >> 16)  # 0 when the zip records no Unix file type
    if kind and kind not in (stat.S_IFREG, stat.S_IFDIR):
        return [Problem(where, f"member {name!r} is a link or special file, not a plain file.",
                        "Replace links by the files themselves (`zip` without `-y`).")]
    return []


def check_zip_members(archive: Path, max_bytes: int = MAX_UNCOMPRESSED_BYTES,
                      max_members: int = MAX_MEMBERS) -> list[Problem]:
    """Every unsafe member of `archive`, plus size and count limits; empty when safe."""
    where = Path(archive).name
    try:
        with zipfile.ZipFile(archive) as zf:
            infos = zf.infolist()
    except (OSError, zipfile.BadZipFile) as exc:
        return [Problem(where, f"not a readable zip file ({exc}).",
                        "Pass a .zip as downloaded from Meta-Album, or the extracted folder.")]
    problems = [p for info in infos for p in _member_problems(info, where)]
    total = sum(info.file_size for info in infos)
    if total > max_bytes:
        problems.append(Problem(where, f"expands to {total} bytes, more than the {max_bytes} "
                                "allowed.", "Split the archive or extract it yourself."))
    if len(infos) > max_members:
        problems.append(Problem(where, f"holds {len(infos)} members, more than the "
                                f"{max_members} allowed.", "Split the archive."))
    return problems


def extract_zip_safely(archive: Path, dest: Path, max_bytes: int = MAX_UNCOMPRESSED_BYTES,
                       max_members: int = MAX_MEMBERS) -> None:
    """Extract `archive` into the folder `dest` (created), refusing any unsafe member.

    Raises:
        DataProblemsError: listing every unsafe member; nothing has been written then.
    """
    problems = check_zip_members(archive, max_bytes, max_members)
    if problems:
        raise DataProblemsError(f"Refusing to extract {archive}", problems)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    budget = max_bytes
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            target = dest.joinpath(*PurePosixPath(info.filename.replace("\\", "/")).parts)
            if info.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            # Sizes in the central directory can lie; count the bytes actually written.
            with zf.open(info) as src, target.open("wb") as out:
                budget -= _copy_bounded(src, out, budget, archive)


def _copy_bounded(src, out, budget: int, archive: Path) -> int:
    written = 0
    while chunk := src.read(1 << 20):
        written += len(chunk)
        if written > budget:
            raise DataProblemsError(f"Refusing to extract {archive}", [Problem(
                Path(archive).name, "expands beyond the declared sizes and the byte limit.",
                "Re-create the zip with a standard tool.")])
        out.write(chunk)
    return written


def remove_tree(path: Path) -> None:
    """Remove a folder we created, ignoring a concurrent removal."""
    shutil.rmtree(path, ignore_errors=True)
