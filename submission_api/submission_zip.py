"""Submission zip safety: the one place that decides whether a zip may be stored or extracted.

Both sides use it: the server before it stores an upload and the participant's `arena zip` before
it writes one, so a zip that `arena zip` accepts is never refused by the server for safety. It
reads the central directory, then stream-decompresses every entry to count the *real* sizes (a
header may lie) without ever holding a file in memory. Nested archives are plain files here: they
are never expanded, so a zip-in-zip bomb costs only its own compressed bytes. Pure stdlib.
"""

from __future__ import annotations

import os
import stat
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from submission_api.safe_unzip import OutsideFolder, TooManyBytes, write_members

MODEL_FILE = "model.py"
_CHUNK = 64 * 1024
# Folders and files `build_submission_zip` leaves out: caches, VCS data, outputs of `arena run`.
SKIPPED_DIRS = frozenset(
    {"__pycache__", ".git", ".hg", ".svn", ".ipynb_checkpoints", ".venv", "venv",
     "node_modules", "output", "outputs", ".arena", "__MACOSX"}
)
SKIPPED_SUFFIXES = (".pyc", ".pyo", "~", ".swp")
# macOS resource-fork folders carry no code; ignored when finding the submission root.
_IGNORED_TOP = "__MACOSX"


@dataclass(frozen=True)
class ZipLimits:
    """Bounds for one submission zip (defaults fit code plus modest weights)."""

    max_files: int = 2_000
    max_total_uncompressed: int = 2 * 1024**3
    max_file_uncompressed: int = 1024**3
    max_ratio: float = 200.0
    ratio_min_size: int = 1024**2  # small files may compress well; judge big ones
    max_name_chars: int = 512
    """A whole entry name; extraction adds its folder, and PATH_MAX is 4,096 bytes."""
    max_component_bytes: int = 255
    """One folder or file name in UTF-8 (NAME_MAX of ext4, xfs, tmpfs)."""
    max_depth: int = 32
    """Folders an entry may be nested in: code and weights need a few."""


@dataclass(frozen=True)
class ZipReport:
    """What a valid zip holds; `root` is "" or the single top-level folder holding model.py."""

    root: str
    n_files: int
    total_uncompressed: int
    names: tuple[str, ...]


class UnsafeZipError(ValueError):
    """A zip refused for safety or shape; `code` is stable and machine-readable (`zip.*`)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def check_submission_zip(path: str | os.PathLike, limits: ZipLimits = ZipLimits()) -> ZipReport:
    """Validate a submission zip without extracting it.

    Raises:
        UnsafeZipError: with a `zip.*` code naming the first problem found.
    """
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            files = _check_entries(infos, limits)
            root = _find_root(files)
            total = _measure_real_sizes(zf, infos, limits)
    except UnsafeZipError:
        raise
    # UnicodeDecodeError: an entry flagged UTF-8 whose name bytes are not (zipfile raises it
    # while reading the central directory); like any unreadable header it means a corrupt zip.
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError,
            UnicodeDecodeError) as exc:
        raise UnsafeZipError(
            "zip.corrupt",
            f"the file is not a readable zip ({exc}); expected an intact zip archive — "
            "rebuild it with `arena zip` or `zip -r` and upload it again",
        ) from exc
    return ZipReport(root=root, n_files=len(files), total_uncompressed=total, names=tuple(files))


def _check_entries(infos: list[zipfile.ZipInfo], limits: ZipLimits) -> list[str]:
    """Check names, types, flags and declared sizes; return the file (not folder) names."""
    if len(infos) > limits.max_files:
        raise UnsafeZipError(
            "zip.too_many_files",
            f"the zip holds {len(infos)} entries; at most {limits.max_files} are allowed — "
            "leave out data, caches and outputs",
        )
    seen: set[str] = set()
    files: list[str] = []
    declared = 0
    for info in infos:
        name = _check_name(info.filename)
        _check_name_shape(name, limits)
        _check_type_and_flags(info)
        key = name.rstrip("/").casefold()
        if key in seen:
            raise UnsafeZipError(
                "zip.duplicate_name",
                f"the entry {info.filename!r} appears more than once (names are compared "
                "case-insensitively); expected unique paths — rebuild the zip from a folder",
            )
        seen.add(key)
        if info.is_dir():
            continue
        _check_declared_size(info, limits)
        declared += info.file_size
        files.append(name)
    if declared > limits.max_total_uncompressed:
        raise _too_large(declared, limits)
    _check_total_ratio(declared, sum(i.compress_size for i in infos), limits)
    _check_path_conflicts(files)
    return files


def _check_name_shape(name: str, limits: ZipLimits) -> None:
    """Refuse names extraction cannot write: too long, a too long part, too deeply nested."""
    parts = PurePosixPath(name).parts
    longest = max((len(p.encode("utf-8", "surrogatepass")) for p in parts), default=0)
    if len(name) > limits.max_name_chars or longest > limits.max_component_bytes:
        raise UnsafeZipError(
            "zip.name_too_long",
            f"the entry {name[:80]!r}... is {len(name)} characters long (longest part "
            f"{longest} bytes); at most {limits.max_name_chars} characters and "
            f"{limits.max_component_bytes} bytes per folder or file name are allowed — "
            "rename it shorter",
        )
    if len(parts) - (0 if name.endswith("/") else 1) > limits.max_depth:
        raise UnsafeZipError(
            "zip.too_deep",
            f"the entry {name[:80]!r}... is nested {len(parts)} levels deep; at most "
            f"{limits.max_depth} folders are allowed — flatten the tree",
        )


def _check_total_ratio(uncompressed: int, compressed: int, limits: ZipLimits) -> None:
    """The whole zip's expansion, whatever each entry's: 2,000 small files of zeros each pass
    the per-entry ratio (judged from `ratio_min_size` up) but expand 900x together."""
    ratio = uncompressed / max(compressed, 1)
    if uncompressed >= limits.ratio_min_size and ratio > limits.max_ratio:
        raise UnsafeZipError(
            "zip.bomb",
            f"the zip expands {ratio:.0f}x in all ({compressed} -> {uncompressed} bytes); "
            f"at most {limits.max_ratio:.0f}x is allowed — this looks like a zip bomb",
        )


def _check_name(raw: str) -> str:
    """Refuse names that could land outside the extraction folder."""
    if "\\" in raw:
        raise UnsafeZipError(
            "zip.backslash_path",
            f"the entry {raw!r} contains a backslash; expected '/'-separated relative paths — "
            "build the zip with `arena zip`",
        )
    if "\x00" in raw or raw.startswith("/") or (len(raw) > 1 and raw[1] == ":"):
        raise UnsafeZipError(
            "zip.absolute_path",
            f"the entry {raw!r} is an absolute path; expected paths relative to the submission "
            "folder — zip the folder's contents, not its location",
        )
    parts = PurePosixPath(raw).parts
    if ".." in parts or not parts:
        raise UnsafeZipError(
            "zip.parent_path",
            f"the entry {raw!r} climbs out of the archive with '..'; expected paths inside the "
            "submission folder",
        )
    return raw


def _check_type_and_flags(info: zipfile.ZipInfo) -> None:
    """Refuse links, devices, encrypted entries and compressions stdlib cannot read."""
    mode = info.external_attr >> 16
    kind_bits = stat.S_IFMT(mode)  # 0: tools that store permissions only, a regular file
    if info.create_system == 3 and kind_bits and kind_bits not in (stat.S_IFREG, stat.S_IFDIR):
        kind = "symbolic link" if stat.S_ISLNK(mode) else "device, fifo or socket"
        raise UnsafeZipError(
            "zip.link" if stat.S_ISLNK(mode) else "zip.special_file",
            f"the entry {info.filename!r} is a {kind}; expected regular files only — "
            "copy the target file into the folder instead",
        )
    if info.flag_bits & 0x1:
        raise UnsafeZipError(
            "zip.encrypted",
            f"the entry {info.filename!r} is encrypted; expected an unencrypted zip — "
            "rebuild it without a password",
        )
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED,
                                  zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA):
        raise UnsafeZipError(
            "zip.unsupported_compression",
            f"the entry {info.filename!r} uses compression method {info.compress_type}; "
            "expected stored or deflate — rebuild it with `arena zip`",
        )


def _check_declared_size(info: zipfile.ZipInfo, limits: ZipLimits) -> None:
    if info.file_size > limits.max_file_uncompressed:
        raise UnsafeZipError(
            "zip.too_large",
            f"the entry {info.filename!r} expands to {info.file_size} bytes; at most "
            f"{limits.max_file_uncompressed} per file are allowed",
        )
    ratio = info.file_size / max(info.compress_size, 1)
    if info.file_size >= limits.ratio_min_size and ratio > limits.max_ratio:
        raise UnsafeZipError(
            "zip.bomb",
            f"the entry {info.filename!r} expands {ratio:.0f}x ({info.compress_size} -> "
            f"{info.file_size} bytes); at most {limits.max_ratio:.0f}x is allowed — "
            "this looks like a zip bomb",
        )


def _check_path_conflicts(files: list[str]) -> None:
    """A file may not also be a parent folder of another entry (extraction would break)."""
    keys = {f.casefold() for f in files}
    for name in files:
        for parent in PurePosixPath(name).parents:
            if str(parent) != "." and str(parent).casefold() in keys:
                raise UnsafeZipError(
                    "zip.duplicate_name",
                    f"{str(parent)!r} is both a file and the folder of {name!r}; "
                    "expected a tree of unique paths",
                )


def _find_root(files: list[str]) -> str:
    """Return "" when model.py is at the top, or the single top-level folder that holds it."""
    if MODEL_FILE in files:
        return ""
    tops = {PurePosixPath(f).parts[0] for f in files} - {_IGNORED_TOP}
    if len(tops) == 1:
        (top,) = tops
        if f"{top}/{MODEL_FILE}" in files:
            return top
    raise UnsafeZipError(
        "zip.no_model",
        f"no {MODEL_FILE} found at the top of the zip or inside a single top-level folder "
        f"(top-level entries: {sorted(tops)[:10]}); zip the contents of the folder holding "
        f"{MODEL_FILE}",
    )


def _measure_real_sizes(zf: zipfile.ZipFile, infos: list[zipfile.ZipInfo],
                        limits: ZipLimits) -> int:
    """Decompress every entry in chunks, counting real bytes; zipfile checks each CRC at the end."""
    total = 0
    compressed = sum(info.compress_size for info in infos)
    for info in infos:
        if info.is_dir():
            continue
        with zf.open(info) as stream:
            while chunk := stream.read(_CHUNK):
                total += len(chunk)
                if total > limits.max_total_uncompressed:
                    raise _too_large(total, limits)
                if total > limits.ratio_min_size and total > limits.max_ratio * compressed:
                    _check_total_ratio(total, compressed, limits)  # headers lied
    return total


def _too_large(size: int, limits: ZipLimits) -> UnsafeZipError:
    return UnsafeZipError(
        "zip.too_large",
        f"the zip expands to more than {size} bytes; at most {limits.max_total_uncompressed} "
        "are allowed — leave out datasets and large checkpoints",
    )


def safe_extract(zip_path: str | os.PathLike, dest: str | os.PathLike,
                 limits: ZipLimits = ZipLimits()) -> Path:
    """Check the zip, extract its regular files under `dest`, and return the submission root.

    Permissions from the archive are ignored and existing files are never overwritten.
    """
    report = check_submission_zip(zip_path, limits)
    with zipfile.ZipFile(zip_path) as zf:
        try:
            dest_path = write_members(zf, Path(dest), limits.max_total_uncompressed)
        except OutsideFolder as exc:  # defence in depth after _check_name
            raise UnsafeZipError("zip.parent_path", str(exc)) from exc
        except TooManyBytes as exc:  # the zip changed since it was checked
            raise _too_large(limits.max_total_uncompressed + 1, limits) from exc
    return dest_path / report.root if report.root else dest_path


def build_submission_zip(folder: str | os.PathLike, out_path: str | os.PathLike,
                         limits: ZipLimits = ZipLimits()) -> Path:
    """Write a deterministic zip of `folder`'s contents and check it like the server will.

    Entries are sorted, timestamps fixed and permissions normalised, so the same folder always
    gives the same bytes (and the same sha256). Caches, VCS folders, hidden files and output
    folders are skipped. Raises UnsafeZipError (and writes nothing) if the result would be refused.
    """
    src = Path(folder).resolve()
    out = Path(out_path).resolve()
    if not (src / MODEL_FILE).is_file():
        raise UnsafeZipError(
            "zip.no_model", f"{src} has no {MODEL_FILE}; expected the folder that holds it"
        )
    tmp = out.with_name(out.name + ".part")
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
            for rel in _collect_files(src, skip={out, tmp}):
                info = zipfile.ZipInfo(rel.as_posix(), date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                info.create_system = 3
                info.external_attr = (stat.S_IFREG | 0o644) << 16
                with open(src / rel, "rb") as fh, zf.open(info, "w") as dst:
                    while chunk := fh.read(_CHUNK):
                        dst.write(chunk)
        check_submission_zip(tmp, limits)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def _collect_files(src: Path, skip: set[Path]) -> list[Path]:
    """Relative paths of the files to zip, sorted; refuses symbolic links."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if name.startswith(".") or name.endswith(SKIPPED_SUFFIXES) or path in skip:
                continue
            if path.is_symlink() or not path.is_file():
                raise UnsafeZipError(
                    "zip.link",
                    f"{path} is a link or special file; expected regular files only — copy the "
                    "target into the folder",
                )
            found.append(path.relative_to(src))
        for d in dirnames:
            if (Path(dirpath) / d).is_symlink():
                raise UnsafeZipError("zip.link", f"{Path(dirpath) / d} is a symbolic link; "
                                     "expected a real folder — copy it in")
    return sorted(found, key=lambda p: p.as_posix())
