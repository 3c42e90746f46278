"""The start-up sweep lists every sandbox container on the host (other workers', other test
processes'): one removed between Docker's list and its inspection is skipped, not an error
(a 404 from docker-py failed the whole sweep, with a traceback in the worker's log)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import docker.errors
from docker.models.containers import ContainerCollection

from worker.sweep import remove_orphan_containers


class RacingApi:
    """Lists two containers; the first is gone by the time it is inspected."""

    def __init__(self, runs_dir: Path) -> None:
        self.removed: list[str] = []
        self.runs_dir = runs_dir

    def containers(self, **_: object) -> list[dict]:
        return [{"Id": "gone"}, {"Id": "orphan"}]

    def inspect_container(self, container_id: str) -> dict:
        if container_id == "gone":
            raise docker.errors.NotFound("No such container: gone")
        return {"Id": container_id, "Name": "/arena-dep-run-7-meta-train",
                "Mounts": [{"Source": str(self.runs_dir / "run-7" / "output")}]}

    def remove_container(self, container_id: str, **_: object) -> None:
        self.removed.append(container_id)


def test_a_container_removed_during_the_list_is_skipped(tmp_path: Path) -> None:
    api = RacingApi(tmp_path)
    client = SimpleNamespace(api=api)
    client.containers = ContainerCollection(client=client)
    assert remove_orphan_containers(client, "dep", tmp_path) == ["arena-dep-run-7-meta-train"]
    assert api.removed == ["orphan"]
