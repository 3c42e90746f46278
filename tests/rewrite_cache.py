"""pytest's rewritten test modules kept between runs, outside the tree.

pytest rewrites every test module's asserts at collection (6 s of each xdist worker's 16-17 s of
collection CPU) and keeps the result in a `__pycache__` beside the module, unless
`PYTHONDONTWRITEBYTECODE` is set, as on our machines: then it redoes it every run. Writing
bytecode beside the code is what that setting is there to prevent (the sandboxes mount code
folders; kits and bundles are packed from them), so the rewritten modules alone go to
`ARENA_TEST_REWRITE_CACHE`, else `$XDG_CACHE_HOME/metadl-arena/pytest-rewrite` (~/.cache):
nothing under the checkout, and nothing else changes (every other import, and every process the
tests start, keeps `PYTHONDONTWRITEBYTECODE`). pytest's pycs are checked against the source's
hash (not its mtime), so a fresh clone at the same path (CI) finds them valid.

It uses pytest's own reader and writer of these pycs (`_pytest.assertion.rewrite`: private
names); where they are missing (another pytest) it does nothing and pytest rewrites as before.
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path
from typing import Any

from _pytest.assertion import rewrite

NEEDED = ("get_cache_dir", "_rewrite_test", "_write_pyc", "try_makedirs", "PYC_TAIL",
          "assertstate_key")


def cache_root() -> Path:
    named = os.environ.get("ARENA_TEST_REWRITE_CACHE")
    if named:
        return Path(named)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "metadl-arena" / "pytest-rewrite"


def keep_rewritten_modules() -> bool:
    """Read and write the rewritten modules' pycs under `cache_root()`; whether it did.

    Nothing to do where pytest writes its own (bytecode allowed, or a `PYTHONPYCACHEPREFIX`
    already chosen) or where its internals differ from the names this relies on."""
    if not sys.dont_write_bytecode or sys.pycache_prefix:
        return False
    if not all(hasattr(rewrite, name) for name in NEEDED):
        return False
    if getattr(rewrite._rewrite_test, "keeps_in", None) is not None:
        return True  # installed already (a second conftest import)
    root = cache_root()

    def cache_dir(file_path: Path) -> Path:
        return root / Path(*file_path.parts[1:-1])  # as pytest lays out PYTHONPYCACHEPREFIX

    original = rewrite._rewrite_test

    def rewrite_and_keep(fn: Path, config: Any) -> tuple[bytes, types.CodeType]:
        source_hash, code = original(fn, config)
        pyc = cache_dir(fn) / (fn.name[:-3] + rewrite.PYC_TAIL)
        if rewrite.try_makedirs(pyc.parent):  # pid-named file, then an atomic rename
            rewrite._write_pyc(config.stash[rewrite.assertstate_key], code, source_hash, pyc)
        return source_hash, code

    rewrite_and_keep.keeps_in = root  # type: ignore[attr-defined]
    rewrite.get_cache_dir = cache_dir  # where pytest looks for a pyc before rewriting
    rewrite._rewrite_test = rewrite_and_keep
    return True
