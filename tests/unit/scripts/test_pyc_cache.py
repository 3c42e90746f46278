"""scripts/pyc_cache.py: bytecode reused only for the very source it was compiled from."""

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
import pyc_cache  # noqa: E402


def site_with_module(root: Path, text: str) -> Path:
    site = root / "site-packages"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "mod.py").write_text(text)
    return site


def compiled(site: Path) -> Path:
    return Path(importlib.util.cache_from_source(str(site / "pkg" / "mod.py")))


def test_a_second_virtualenv_reuses_the_bytecode_of_the_same_source(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = tmp_path / "cache"
    first = site_with_module(tmp_path / "a", "VALUE = 1\n")
    pyc_cache.main(first, cache)
    assert pyc_cache.is_current(compiled(first), first / "pkg" / "mod.py")
    second = tmp_path / "b" / "site-packages"
    (second / "pkg").mkdir(parents=True)
    os.link(first / "pkg" / "mod.py", second / "pkg" / "mod.py")  # as uv links from its cache
    capsys.readouterr()
    pyc_cache.main(second, cache)
    assert "1 modules' bytecode reused, 0 compiled" in capsys.readouterr().err
    assert compiled(second).read_bytes() == compiled(first).read_bytes()


def test_a_changed_source_is_compiled_again_never_given_the_old_bytecode(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache = tmp_path / "cache"
    first = site_with_module(tmp_path / "a", "VALUE = 1\n")
    pyc_cache.main(first, cache)
    second = site_with_module(tmp_path / "b", "VALUE = 22\n")  # another size, another mtime
    shutil.copystat(first / "pkg" / "mod.py", second / "pkg" / "mod.py")  # even the same mtime
    capsys.readouterr()
    pyc_cache.main(second, cache)
    assert "0 modules' bytecode reused, 1 compiled" in capsys.readouterr().err
    assert pyc_cache.is_current(compiled(second), second / "pkg" / "mod.py")
    namespace: dict[str, object] = {}
    exec(compile((second / "pkg" / "mod.py").read_text(), "mod", "exec"), namespace)
    assert namespace["VALUE"] == 22


def test_stale_bytecode_in_the_virtualenv_is_replaced(tmp_path: Path) -> None:
    site = site_with_module(tmp_path, "VALUE = 1\n")
    pyc_cache.main(site, tmp_path / "cache")
    (site / "pkg" / "mod.py").write_text("VALUE = 333\n")
    assert not pyc_cache.is_current(compiled(site), site / "pkg" / "mod.py")
    pyc_cache.main(site, tmp_path / "cache")
    assert pyc_cache.is_current(compiled(site), site / "pkg" / "mod.py")
