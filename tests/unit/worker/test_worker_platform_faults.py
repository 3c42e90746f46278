"""Issue 13 (10), the worker's side: it reports its engine's images with each claim, releases a
run with a short cause for the participant and the details for operators, and the unsandboxed
local executor says in the run's log that it did not use the phase's image."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx

from worker.client import InternalClient
from worker.pipeline.execute import ExecutionResult
from worker.pipeline.wiring import make_image_lister, note_ignored_image
from worker.settings import WorkerSettings


def recording_client(bodies: list[dict[str, Any]], **kwargs: Any) -> InternalClient:
    def answer(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(409)  # "someone else has it": the answer is not under test

    return InternalClient("http://server", transport=httpx.MockTransport(answer), **kwargs)


def test_a_claim_reports_the_images_and_a_release_the_details():
    bodies: list[dict[str, Any]] = []
    client = recording_client(bodies, list_images=lambda: ["metadl-arena/sandbox:cpu"])
    client.claim(5, "tok", "host/0")
    client.release(5, "tok", 3, "the sandbox image 'x' is not available", detail="http+docker…")
    assert bodies == [{"worker": "host/0", "images": ["metadl-arena/sandbox:cpu"]},
                      {"fencing_token": 3, "error": "the sandbox image 'x' is not available",
                       "detail": "http+docker…"}]


def test_a_worker_that_cannot_tell_its_images_reports_none():
    bodies: list[dict[str, Any]] = []
    recording_client(bodies, list_images=lambda: None).claim(5, "tok", "host/0")
    recording_client(bodies).claim(5, "tok", "host/0")
    assert bodies == [{"worker": "host/0"}, {"worker": "host/0"}]


def test_the_image_list_is_the_engines_tags_and_none_for_the_local_executor(monkeypatch):
    from worker.pipeline import wiring

    engine = SimpleNamespace(images=SimpleNamespace(list=lambda: [
        SimpleNamespace(tags=["b:1", "a:2"]), SimpleNamespace(tags=[]),
        SimpleNamespace(tags=["a:2"])]))
    monkeypatch.setattr(wiring, "connect_docker", lambda: engine)
    assert make_image_lister(WorkerSettings(executor="docker"))() == ["a:2", "b:1"]
    assert make_image_lister(WorkerSettings(executor="local"))() is None
    monkeypatch.setattr(wiring, "connect_docker", lambda: None)
    assert make_image_lister(WorkerSettings(executor="auto"))() is None


def test_the_local_executor_says_in_the_run_log_that_it_ignored_the_phase_image(tmp_path: Path):
    def local(request: Any, cancel: threading.Event) -> ExecutionResult:
        return ExecutionResult(exit_code=0, oom_killed=False, timed_out=False, wall_time_s=1.0,
                               stdout="ok", stderr="warning: x\n")

    request = SimpleNamespace(image="lab/special:2")
    result = note_ignored_image(local)(request, threading.Event())  # type: ignore[arg-type]
    assert result.stderr.startswith("[arena] unsandboxed local mode")
    assert "'lab/special:2'" in result.stderr and result.stderr.endswith("warning: x\n")
    assert (result.exit_code, result.stdout) == (0, "ok")
