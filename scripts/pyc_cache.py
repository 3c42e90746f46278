"""Compile a virtualenv's bytecode, reusing what earlier virtualenvs of this machine compiled.

Why: our machines set PYTHONDONTWRITEBYTECODE, so the installer must compile every module
(else each process the tests start compiles torch, fastapi, ... again). A fresh clone (CI) makes
a fresh .venv whose files uv hard-links from its cache: the same sources, with the same mtimes,
as the last virtualenv's, yet compiling them all again cost ~24 s of CPU (12.5 s of wall on 2
cores) per run. A timestamp-checked .pyc records its source's mtime and size; this keeps each
compiled file under (path in site-packages, mtime, size) and links it into the next virtualenv.
A source with no such entry is compiled, as the installer would have. Usage:
`python scripts/pyc_cache.py SITE_PACKAGES CACHE_DIR`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import py_compile
import shutil
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


def sources(site: Path) -> list[Path]:
    """Every .py file under `site`."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(site):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        found.extend(Path(folder) / name for name in files if name.endswith(".py"))
    return found


def cache_key(site: Path, source: Path) -> str:
    """The entry of a source: its place, mtime and size (what a timestamp .pyc is checked by)."""
    stat = source.stat()
    key = f"{sys.version}|{source.relative_to(site)}|{stat.st_mtime_ns}|{stat.st_size}"
    return hashlib.sha256(key.encode()).hexdigest()


def is_current(compiled: Path, source: Path) -> bool:
    """Whether `compiled` is a timestamp .pyc of `source` as it is now (what the import checks)."""
    try:
        header = compiled.read_bytes()[:16]
    except OSError:
        return False
    stat = source.stat()
    return (len(header) == 16 and header[:4] == importlib.util.MAGIC_NUMBER
            and int.from_bytes(header[4:8], "little") == 0
            and int.from_bytes(header[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF
            and int.from_bytes(header[12:16], "little") == stat.st_size & 0xFFFFFFFF)


def link_or_copy(source: Path, target: Path) -> None:
    """Hard-link `source` at `target` (a copy across file systems), replacing nothing."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except FileExistsError:
        pass
    except OSError:
        shutil.copy2(source, target)


def compile_one(source: Path) -> bool:
    """Compile as the installer does (timestamp-checked); False where it does not compile."""
    try:
        py_compile.compile(str(source), doraise=True,
                           invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
    except (py_compile.PyCompileError, OSError, ValueError):
        return False
    return True


def main(site: Path, cache: Path) -> None:
    cache.mkdir(parents=True, exist_ok=True)
    missing: list[tuple[Path, Path, Path]] = []
    reused = 0
    for source in sources(site):
        compiled = Path(importlib.util.cache_from_source(str(source)))
        if is_current(compiled, source):
            continue
        compiled.unlink(missing_ok=True)
        entry = cache / f"{cache_key(site, source)}.pyc"
        if is_current(entry, source):
            link_or_copy(entry, compiled)
            reused += 1
        else:
            missing.append((source, compiled, entry))
    todo = [source for source, _, _ in missing]
    if len(todo) < 256:  # a pool's start costs more than a few hundred small compiles
        done = [compile_one(source) for source in todo]
    else:
        with ProcessPoolExecutor(os.cpu_count() or 1) as pool:
            done = list(pool.map(compile_one, todo, chunksize=64))
    for (_, compiled, entry), ok in zip(missing, done, strict=True):
        if ok and compiled.exists():
            link_or_copy(compiled, entry)
    sys.stderr.write(f"pyc_cache: {reused} modules' bytecode reused, {sum(done)} compiled\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), Path(sys.argv[2]))
