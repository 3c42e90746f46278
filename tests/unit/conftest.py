"""The unit tier's promise, checked: a test marked `unit` (tests/conftest.py) starts no process
and opens no network socket, in its fixtures' setup, its body or its teardown. One that does
fails at its teardown, naming what it did, so that it is classed as integration
(`SPAWNING_UNIT_FILES` in tests/conftest.py) instead of slowing the tier that must stay quick.

The checks wrap the calls every way of starting a process ends in (`os.fork`, `os.posix_spawn`,
the `_posixsubprocess.fork_exec` of subprocess and multiprocessing, `os.system`) and the
binds and connects of internet sockets. They record and let the call go on: product code that
catches every exception must not hide one from us.
"""

from __future__ import annotations

import _posixsubprocess
import os
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

_SEEN: list[list[str]] = []
"""What the running unit test did; empty (the list of lists) outside a unit test."""
_FOREIGN: list[set[int]] = []
"""The threads that were running before the test's phase began (beside the one running it):
an integration test's leftover thread in the same process (an xdist worker runs both tiers) that
connects during a unit test is not that test's doing (a connect to 127.0.0.1:1 failed a scipy
check at teardown in a whole run)."""


def _record(what: str) -> None:
    if _SEEN and threading.get_ident() not in _FOREIGN[-1]:
        _SEEN[-1].append(what)


def _watch(owner: Any, name: str, describe: Callable[..., str | None]) -> None:
    original = getattr(owner, name, None)
    if original is None:
        return

    def watched(*args: Any, **kwargs: Any) -> Any:
        what = describe(*args, **kwargs)
        if what is not None:
            _record(what)
        return original(*args, **kwargs)

    setattr(owner, name, watched)


def _process(name: str) -> Callable[..., str]:
    def describe(*args: Any, **_: Any) -> str:
        argv = args[0] if name == "fork_exec" and args else args[1] if len(args) > 1 else ""
        shown = " ".join(os.fsdecode(a) for a in argv) if isinstance(argv, list | tuple) else ""
        return f"{name}({shown[:120]})" if shown else f"{name}()"
    return describe


def _network(name: str) -> Callable[..., str | None]:
    def describe(sock: socket.socket, address: Any, *_: Any) -> str | None:
        if sock.family not in (socket.AF_INET, socket.AF_INET6):
            return None  # a socketpair or a unix socket of this process: no network
        return f"socket.{name}({address!r})"
    return describe


for _name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
    _watch(os, _name, _process(_name))
_watch(_posixsubprocess, "fork_exec", _process("fork_exec"))
_watch(subprocess, "_fork_exec", _process("fork_exec"))  # its own name for the same call
for _name in ("bind", "connect", "connect_ex"):
    _watch(socket.socket, _name, _network(_name))


@contextmanager
def _guard(item: pytest.Item) -> Iterator[None]:
    if item.get_closest_marker("unit") is None:
        yield
        return
    _SEEN.append(getattr(item, "_arena_spawned", []))
    _FOREIGN.append({thread.ident for thread in threading.enumerate()
                     if thread.ident is not None} - {threading.get_ident()})
    try:
        yield
    finally:
        _FOREIGN.pop()
        item._arena_spawned = _SEEN.pop()  # type: ignore[attr-defined]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with _guard(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with _guard(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    with _guard(item):
        result = yield
    spawned = getattr(item, "_arena_spawned", [])
    if spawned:
        pytest.fail(f"{item.nodeid} is marked unit but started processes or opened network "
                    f"sockets: {sorted(set(spawned))[:5]}; list its file in "
                    "SPAWNING_UNIT_FILES (tests/conftest.py) so it runs as integration",
                    pytrace=False)
    return result
