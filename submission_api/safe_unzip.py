"""The one loop that writes a checked zip to disk, for submissions (`submission_zip.safe_extract`)
and dataset archives (`data.archive.extract_zip_safely`); each caller checks the members by its
own rules first and turns the errors below into its own.

Every member lands under `dest` (its name read as a '/'-separated relative path, resolved and
checked to stay inside: defence in depth after the caller's checks), permissions from the
archive are ignored, and the bytes written are counted as they arrive, so a member whose
headers understate its size still stops at `max_bytes`.
"""

from __future__ import annotations

import zipfile
from pathlib import Path, PurePosixPath

CHUNK = 1 << 20


class OutsideFolder(ValueError):
    """A member's name would land outside the extraction folder."""


class TooManyBytes(ValueError):
    """The members expand beyond `max_bytes` (their headers understated it)."""


def write_members(zf: zipfile.ZipFile, dest: Path, max_bytes: int | None = None, *,
                  overwrite: bool = False) -> Path:
    """Write every member of `zf` under `dest` (created); returns `dest` resolved. Without
    `overwrite`, an existing file is never replaced (FileExistsError).

    Raises:
        OutsideFolder: naming the member; TooManyBytes: past `max_bytes` (None: no bound).
    """
    dest = Path(dest).resolve()
    dest.mkdir(parents=True, exist_ok=True)
    left = max_bytes
    for info in zf.infolist():
        target = dest.joinpath(*PurePosixPath(info.filename.replace("\\", "/")).parts).resolve()
        if not target.is_relative_to(dest):
            raise OutsideFolder(f"{info.filename!r} leaves {dest}")
        if info.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        with zf.open(info) as src, target.open("wb" if overwrite else "xb") as out:
            while chunk := src.read(CHUNK):
                if left is not None:
                    left -= len(chunk)
                    if left < 0:
                        raise TooManyBytes(f"{info.filename!r} expands past {max_bytes} bytes")
                out.write(chunk)
    return dest
