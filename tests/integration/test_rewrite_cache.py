"""tests/rewrite_cache.py: with PYTHONDONTWRITEBYTECODE set, pytest's rewritten test modules are
kept under the cache folder, never beside the code, and read back on the next run."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

from _pytest.assertion import rewrite

TESTS = Path(__file__).resolve().parents[1]
CONFTEST = f"import sys\nsys.path.insert(0, {str(TESTS)!r})\n" \
           "from rewrite_cache import keep_rewritten_modules\nkeep_rewritten_modules()\n"
TEST = "def test_sum():\n    total = 1 + 1\n    assert total == 3\n"


def _pytest(folder: Path, cache: Path) -> str:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "ARENA_TEST_REWRITE_CACHE": str(cache),
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # schemathesis & co.: seconds to import
    env.pop("PYTHONPYCACHEPREFIX", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--rootdir", str(folder), str(folder)],
                          env=env, capture_output=True, text=True, timeout=120)
    return done.stdout + done.stderr


def test_rewritten_modules_are_kept_outside_the_tree_and_read_back(tmp_path: Path):
    folder, cache = tmp_path / "suite", tmp_path / "cache"
    folder.mkdir()
    (folder / "conftest.py").write_text(CONFTEST)
    source = folder / "test_sum.py"
    source.write_text(TEST)

    first = _pytest(folder, cache)
    assert "1 failed" in first and "assert 2 == 3" in first, first  # rewritten: introspection
    kept = list(cache.rglob("test_sum*.pyc"))
    assert len(kept) == 1 and kept[0].parent == cache / Path(*folder.parts[1:]), kept
    assert not list(folder.rglob("__pycache__")), "bytecode written beside the code"

    # The next run reads the kept module instead of rewriting: a kept module with another
    # body (under the source's hash) is what runs.
    other = compile("def test_sum():\n    raise AssertionError('read from the cache')\n",
                    str(source), "exec")
    source_hash = importlib.util.source_hash(source.read_bytes())
    with kept[0].open("wb") as handle:
        rewrite._write_pyc_fp(handle, source_hash, other)
    second = _pytest(folder, cache)
    assert "read from the cache" in second, second
