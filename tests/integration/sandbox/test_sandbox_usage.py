"""CPU time, peak memory and stage marks of a real two-stage Docker run (issue 38.6): read
from each container's cgroup after it exits (worker/sandbox_usage.py), kept per stage, and sent
with `finish` as typed fields."""

from __future__ import annotations

import os
import threading
import uuid
from pathlib import Path

import pytest

from submission_api.contract.usage import MARK_ORDER
from submission_api.contract.wire import FinishBody
from submission_api.data import load_collection
from submission_api.protocols import ProtocolParams
from submission_api.runner.prepare import prepare_run
from worker import sandbox
from worker.pipeline.execute import ExecutionRequest, make_docker_executor
from worker.pipeline.score import Outcome, build_record, run_usage
from worker.sandbox import SandboxLimits, SandboxSpec, run_sandbox
from worker.sandbox_usage import CGROUP_ROOT, PARENT, usage_parent

pytestmark = [pytest.mark.integration, pytest.mark.docker]

IMAGE = os.environ.get("ARENA_SANDBOX_IMAGE", "metadl-arena/sandbox:cpu")
RANDOM_BASELINE = Path(__file__).parents[3] / "starting_kit" / "baselines" / "random"
HUNGRY = """
import time
block = bytearray(96 * 2**20)  # touched: 96 MiB resident
started = time.process_time()
while time.process_time() - started < 0.3:
    pass
print(open("/proc/self/cgroup").read())
"""


def _leftover_parents() -> list[str]:
    return [str(p) for p in CGROUP_ROOT.glob(f"*/{PARENT}/*") if p.is_dir()]


def test_one_container_reports_its_cpu_time_and_peak_memory(docker_client, tmp_path: Path,
                                                             monkeypatch):
    for name in ("submission", "bundle"):
        (tmp_path / name).mkdir()
    (tmp_path / "submission" / "main.py").write_text(HUNGRY)
    ours: list[str] = []  # this run's parent: other test processes' runs have theirs meanwhile

    def recorded_parent(client):  # noqa: ANN001, ANN202
        parent = usage_parent(client)
        ours.append(parent)
        return parent

    monkeypatch.setattr(sandbox, "usage_parent", recorded_parent)
    spec = SandboxSpec(image=IMAGE, command=("python3", "/submission/main.py"),
                       submission_dir=tmp_path / "submission", bundle_dir=tmp_path / "bundle",
                       output_dir=tmp_path / "output", name=f"arena-usage-{uuid.uuid4().hex[:8]}")
    result = run_sandbox(docker_client, spec, SandboxLimits(memory_mb=512, wall_time_s=120.0))

    assert result.ok, result.stderr[-2000:]
    assert result.cpu_s is not None and result.cpu_s >= 0.3, result
    assert result.peak_memory_mb is not None and result.peak_memory_mb >= 96, result
    assert result.started_at is not None
    # the usage cgroup's path, which a v1 container reads, names nothing of the run
    assert spec.name not in result.stdout, result.stdout
    assert ours and ours[0] is not None
    assert not [p for p in _leftover_parents() if p.endswith(ours[0])], \
        "the usage cgroup was left behind"


def test_a_two_stage_run_records_usage_per_stage_and_ordered_stage_marks(
        docker_client, tmp_path: Path, tiny_collection: Path, arena_cache: Path):
    collection = load_collection(tiny_collection, arena_cache)
    work = tmp_path / "run"
    prepare_run(collection, ProtocolParams.from_dict({"name": "cross-domain",
                                                      "tasks_per_dataset": 1}),
                (0, 0), work / "bundle", work / "answers")
    (work / "output").mkdir()
    request = ExecutionRequest(
        run_id=1, image=IMAGE, submission_dir=RANDOM_BASELINE,
        bundle_dir=work / "bundle", output_dir=work / "output", time_limit_s=600, cpus=1,
        memory_mb=2048, answers_dir=work / "answers",
        name=f"arena-usage-{uuid.uuid4().hex[:8]}")
    result = make_docker_executor(docker_client)(request, threading.Event())
    assert result.ok, result.stderr[-3000:]

    assert [s.stage for s in result.stages] == ["meta-train", "meta-test"]
    for stage in result.stages:
        assert stage.cpu_s is not None and stage.cpu_s > 0, stage
        assert stage.peak_memory_mb is not None and stage.peak_memory_mb > 1, stage
        assert stage.wall_s > 0, stage
    # issue 38.3: each test task's time, and how long each stage waited for a core
    assert result.task_times is not None and result.task_times.count >= 1, result.task_times
    assert all(s.stall_s is not None and s.stall_s <= s.wall_s for s in result.stages)
    record = build_record(result, work / "output", work / "answers")
    assert record.cpu_time_s == pytest.approx(sum(s.cpu_s or 0 for s in result.stages))
    assert record.peak_memory_mb == max(s.peak_memory_mb or 0 for s in result.stages)

    usage = run_usage(result, scoring_start=max(m.at for m in result.marks))
    body = Outcome("finished", usage=usage).to_finish_body(fencing_token=1)
    names = [m["name"] for m in body["usage"]["marks"]]
    assert names == list(MARK_ORDER), names
    times = [m["at"] for m in body["usage"]["marks"]]
    assert times == sorted(times), body["usage"]["marks"]
    FinishBody(**{**body, "usage": usage})  # the wire's own bounds accept it
