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
from submission_api.safe_unzip import OutsideFolder, TooManyBytes, write_members

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
    # Sizes in the central directory can lie: write_members counts the bytes actually written.
    with zipfile.ZipFile(archive) as zf:
        try:
            write_members(zf, Path(dest), max_bytes, overwrite=True)
        except (TooManyBytes, OutsideFolder) as exc:
            raise DataProblemsError(f"Refusing to extract {archive}", [Problem(
                Path(archive).name, f"expands beyond the declared sizes and the byte limit "
                f"or outside its folder ({exc}).", "Re-create the zip with a standard tool.")]
            ) from exc


def remove_tree(path: Path) -> None:
    """Remove a folder we created, ignoring a concurrent removal."""
    shutil.rmtree(path, ignore_errors=True)
