"""The worker's pre-fault (issue 34.3): the run's data is read before every run; the image is
read again only when the host may have reclaimed some of its pages since its last pre-fault."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from worker import prefault


class FakeContainers:
    def __init__(self) -> None:
        self.runs = 0

    def run(self, image: str, command: list[str], **kwargs: Any) -> bytes:
        self.runs += 1
        assert kwargs["user"] == "1000:1000" and kwargs["network_mode"] == "none"
        assert kwargs["read_only"] and kwargs["cap_drop"] == ["ALL"] and kwargs["remove"]
        return json.dumps({"files": 3, "bytes": 10, "seconds": 0.1}).encode() + b"\n"


class FakeClient:
    def __init__(self) -> None:
        self.containers = FakeContainers()


def test_the_image_is_read_again_only_after_the_host_reclaimed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    counters = [("pgsteal_kswapd", 5), ("drop_pagecache", 0)]
    monkeypatch.setattr(prefault, "reclaim_counters", lambda: tuple(counters))
    monkeypatch.setattr(prefault, "_prefaulted", {})
    (tmp_path / "images.u8").write_bytes(b"x" * 10_000)
    client = FakeClient()

    first = prefault.prefault_run(client, "img", tmp_path)
    assert client.containers.runs == 1 and first["data"]["files"] == 1
    # the file was just written: read in full, or found all cached (cachestat) and left alone
    assert first["data"]["bytes"] + 10_000 * first["data"]["cached"] == 10_000
    prefault.prefault_run(client, "img", tmp_path)
    assert client.containers.runs == 1  # nothing reclaimed: every page still resident
    counters[0] = ("pgsteal_kswapd", 6)
    prefault.prefault_run(client, "img", tmp_path)
    assert client.containers.runs == 2
    prefault.prefault_run(client, "other-img", tmp_path)
    assert client.containers.runs == 3


def test_without_readable_counters_the_image_is_read_before_every_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(prefault, "reclaim_counters", lambda: ())
    monkeypatch.setattr(prefault, "_prefaulted", {})
    client = FakeClient()
    for _ in range(2):
        prefault.prefault_run(client, "img", None)
    assert client.containers.runs == 2


def test_the_hosts_reclaim_counters_are_read_from_vmstat(tmp_path: Path):
    vmstat = tmp_path / "vmstat"
    vmstat.write_text("nr_free_pages 10\npgsteal_direct 4\npgscan_file 7\ndrop_pagecache 1\n")
    assert prefault.reclaim_counters(vmstat) == (("pgsteal_direct", 4), ("pgscan_file", 7),
                                                 ("drop_pagecache", 1))
    assert prefault.reclaim_counters(tmp_path / "absent") == ()
