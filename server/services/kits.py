"""The starting kit and sample data a competition serves (issue 32.4: they could not be
downloaded from the server).

The starting kit is what a participant `pip install`s to run `arena run` offline: the evaluation
core (`submission_api`) and the kit (`starting_kit`: the `arena` command, baselines, tutorial)
from this very installation, so the local run is the platform's own code, with a pyproject that
installs only them (no web, database, queue or docker), plus the files the competition's
bundle adds under `competition/` and each visible phase's published protocol under
`competition/phases/<name>.json` for `arena run --protocol-file`. Sample data is a tar of a
Meta-Album collection the organizer's `arena competition create` uploads (`kit.sample_data`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import shutil
import tarfile
import time
import zipfile
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

import starting_kit
import submission_api
from server.core.errors import InvalidInputError, NotFoundError
from server.services.storage import Storage

KIT_ROOT = "arena-kit"
"""The zip's one top-level folder: `unzip starting_kit.zip && pip install ./arena-kit`."""
KIT_FILES = {"sample_data.tar": "the sample data (a tar of a Meta-Album collection)",
             "files.zip": "files the bundle adds to the starting kit (a zip)"}
STALE_KIT_S = 3600.0
"""An older build of a competition's kit is removed this long after it was written."""
SKIPPED = re.compile(r"(^|/)(__pycache__|\.mypy_cache|\.pytest_cache)(/|$)|\.pyc$")


def kit_path(storage: Storage, competition_id: int, name: str) -> Path:
    """Where a competition's kit file is stored; NotFoundError for a name that is none."""
    if name not in KIT_FILES:
        raise NotFoundError(f"no kit file {name!r}; there are {', '.join(sorted(KIT_FILES))}")
    return storage.root / "kits" / str(int(competition_id)) / name


def store_kit_file(storage: Storage, competition_id: int, name: str, staged: Path) -> int:
    """Check and keep an uploaded kit file (replacing the previous one); returns its size."""
    target = kit_path(storage, competition_id, name)
    if name == "sample_data.tar":
        _check_sample_tar(staged)
    elif not zipfile.is_zipfile(staged):
        raise InvalidInputError(f"{name} is not a zip; `arena competition create` builds it "
                                "from the bundle's kit.files", code="kit.invalid")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(staged, target)
    return target.stat().st_size


def _check_sample_tar(path: Path) -> None:
    try:
        with tarfile.open(path) as tar:
            names = tar.getnames()
    except tarfile.TarError as exc:
        raise InvalidInputError(f"sample_data.tar is not a readable tar ({exc})",
                                code="kit.invalid") from exc
    bad = [n for n in names if n.startswith("/") or ".." in Path(n).parts]
    if bad or not any(Path(n).parts[-2:] == ("info", "meta_splits.txt") for n in names):
        raise InvalidInputError(
            "sample_data.tar must be a Meta-Album collection (its datasets and "
            "info/meta_splits.txt) with relative paths only; " + (
                f"{bad[0]!r} leaves it" if bad else "it has no info/meta_splits.txt"),
            code="kit.invalid")


def phase_file_name(phase: str) -> str:
    """A phase name as the file name of its protocol in the kit (`competition/phases/`)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", phase).strip("-.") or "phase"


def kit_files(storage: Storage, competition_id: int) -> dict[str, int]:
    """The kit files a competition has: name -> bytes."""
    found = {}
    for name in KIT_FILES:
        path = kit_path(storage, competition_id, name)
        if path.is_file():
            found[name] = path.stat().st_size
    return found


def starting_kit_path(storage: Storage, competition_id: int | None,
                      phases: dict[str, dict[str, Any]]) -> Path:
    """The starting kit zip (the participant package, the competition's files and phases),
    built once per content and kept beside the competition's kit files: a download streams a
    file, never a zip held in memory (a kit's files may hold weights)."""
    extra = kit_path(storage, competition_id, "files.zip") if competition_id else None
    stat = extra.stat() if extra is not None and extra.is_file() else None
    key = hashlib.sha256(json.dumps(
        [_package_digest(), phases, [stat.st_size, stat.st_mtime_ns] if stat else None],
        sort_keys=True, default=str).encode()).hexdigest()[:24]
    folder = storage.root / "kits" / (str(int(competition_id)) if competition_id else "any")
    target = folder / f"starting_kit-{key}.zip"
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    staging = storage.tmp_path(suffix=".zip")
    with zipfile.ZipFile(staging, "w", zipfile.ZIP_DEFLATED) as kit:
        for name, data in _package_files().items():
            kit.writestr(f"{KIT_ROOT}/{name}", data)
        if stat is not None and extra is not None:
            with zipfile.ZipFile(extra) as added:
                for info in added.infolist():
                    name = info.filename.lstrip("/")
                    if info.is_dir() or ".." in Path(name).parts:
                        continue
                    with added.open(info) as source, kit.open(
                            f"{KIT_ROOT}/competition/{name}", "w", force_zip64=True) as out:
                        shutil.copyfileobj(source, out, 1 << 20)
        for name, phase in phases.items():
            kit.writestr(f"{KIT_ROOT}/competition/phases/{name}.json",
                         json.dumps(phase, indent=2, default=str))
    staging.replace(target)
    for stale in folder.glob("starting_kit-*.zip"):  # older builds, once no download reads them
        with contextlib.suppress(OSError):
            if stale != target and time.time() - stale.stat().st_mtime > STALE_KIT_S:
                stale.unlink()
    return target


@lru_cache(maxsize=1)
def _package_digest() -> str:
    digest = hashlib.sha256()
    for name, data in sorted(_package_files().items()):
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return digest.hexdigest()


@lru_cache(maxsize=1)
def _package_files() -> dict[str, bytes]:
    """The participant package's files (built once per process: the installation is fixed)."""
    files: dict[str, bytes] = {"pyproject.toml": _pyproject().encode(),
                               "README.md": README.encode()}
    for package in (submission_api, starting_kit):
        root = Path(str(package.__file__)).resolve().parent
        for path in sorted(root.rglob("*")):
            rel = f"{root.name}/{path.relative_to(root).as_posix()}"
            if path.is_file() and not SKIPPED.search(rel):
                files[rel] = path.read_bytes()
    return files


def _pyproject() -> str:
    """A pyproject installing only the participant packages, with their dependencies."""
    try:
        version = metadata.version("metadl-arena")
        needs = [r for r in metadata.requires("metadl-arena") or [] if "extra ==" not in r]
    except metadata.PackageNotFoundError:
        version, needs = "0.1.0", ["numpy>=1.24", "torch>=2.1", "typer>=0.12", "rich>=13.0",
                                   "httpx>=0.27", "pyyaml>=6.0", "pillow>=10.0"]
    deps = "".join(f'    "{r}",\n' for r in needs)
    return f'''[build-system]
requires = ["setuptools>=61", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = "metadl-arena"
version = "{version}"
description = "MetaDL Arena starting kit: the evaluation core and the `arena` command"
requires-python = ">=3.11"
dependencies = [
{deps}]

[project.scripts]
arena = "starting_kit.cli:main"

[tool.setuptools.packages.find]
include = ["submission_api*", "starting_kit*"]

[tool.setuptools.package-data]
starting_kit = ["baselines/*/*.py", "baselines/*/*.json", "*.md"]
"submission_api.report" = ["templates/*"]
"*" = ["*.json", "*.md", "*.html", "*.j2", "*.css", "*.js", "*.txt", "*.yaml"]
'''


README = """# MetaDL Arena starting kit

    pip install torch --index-url https://download.pytorch.org/whl/cpu   # CPU-only torch first
    pip install ./arena-kit
    arena run arena-kit/starting_kit/baselines/protonet --data sample_data \\
        --protocol-file arena-kit/competition/phases/<phase>.json

`competition/phases/` holds each phase's protocol as the platform publishes it: with
`--protocol-file`, `arena run` cuts the tasks that phase cuts, from its datasets. Get the sample
data from the competition page (Get started), or make some with `arena data generate
sample_data`. The tutorial is starting_kit/tutorial.md.
"""
