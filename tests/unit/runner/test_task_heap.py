"""A test task's process reuses the memory it frees within its task (runner/heap.py): glibc's
defaults return large blocks to the kernel and fault fresh pages in for the next one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from submission_api.protocols import ProtocolParams
from submission_api.runner import heap
from submission_api.runner.local import run_local

ONE_TASK = ProtocolParams.from_dict({"name": "cross-domain", "tasks_per_dataset": 1})

HEAP_CHECK = """
import ctypes, os
import numpy as np

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

def heap_state():
    mallinfo2 = ctypes.CDLL(None).mallinfo2
    mallinfo2.restype = MallInfo2
    block = np.ones(64 << 20, np.uint8)  # 64 MiB: glibc maps such a block on its own
    mapped = mallinfo2().hblkhd
    del block
    return {"own mapping": mapped >= 64 << 20, "kept after free": mallinfo2().fordblks >= 64 << 20,
            "huge pages asked": "glibc.malloc.hugetlb=1" in os.environ.get("GLIBC_TUNABLES", "")}
"""

TASK_MODEL = HEAP_CHECK + """
from submission_api.api import Learner, MetaLearner, Predictor

class MyPredictor(Predictor):
    def __init__(self, n_ways):
        self.n_ways = n_ways
    def predict(self, query_set):
        return np.full((len(query_set), self.n_ways), 1.0 / self.n_ways)

class MyLearner(Learner):
    def fit(self, support_set):
        state = heap_state()
        if state != {"own mapping": False, "kept after free": True, "huge pages asked": True}:
            raise RuntimeError(f"heap of a test task: {state}")
        return MyPredictor(support_set[3])
    def save(self, path):
        pass
    def load(self, path):
        pass

class MyMetaLearner(MetaLearner):
    def meta_fit(self, meta_train_generator, meta_valid_generator):
        return MyLearner()
"""


def heap_of_a_fresh_process(tuned: bool) -> dict[str, bool]:
    code = HEAP_CHECK + (
        "from submission_api.runner.heap import keep_freed_memory\n"
        "assert keep_freed_memory()\n" if tuned else "") + "print(heap_state())\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    return eval(done.stdout)  # noqa: S307 - a dict literal printed by our own child


def test_huge_pages_are_added_once_beside_an_operators_tunables():
    assert heap.with_huge_pages({"A": "1"}) == {"A": "1", "GLIBC_TUNABLES": heap.HUGE_PAGES}
    env = heap.with_huge_pages({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2"})
    assert env["GLIBC_TUNABLES"] == f"glibc.malloc.arena_max=2:{heap.HUGE_PAGES}"
    assert heap.with_huge_pages(env) == env


def test_a_process_that_keeps_freed_memory_allocates_from_its_heap_and_keeps_it():
    # The control: glibc's defaults map a 64 MiB block on its own and unmap it on free.
    assert heap_of_a_fresh_process(tuned=False)["own mapping"] is True
    tuned = heap_of_a_fresh_process(tuned=True)
    assert (tuned["own mapping"], tuned["kept after free"]) == (False, True)


def test_a_test_task_runs_with_the_heap_settings_under_arena_run(
        tmp_path: Path, tiny_collection: Path, arena_cache: Path):
    submission = tmp_path / "sub"
    submission.mkdir()
    (submission / "model.py").write_text(TASK_MODEL)
    result = run_local(submission, tiny_collection, tmp_path / "out", protocol=ONE_TASK,
                       cache_dir=arena_cache)
    assert result.state == "finished", result.message
