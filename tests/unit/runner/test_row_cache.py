"""Each distinct test image is converted to float32 once per run, kept in the trusted side's row
cache (`runner/row_cache.py`, issue 38.2), and a task's tensors are gathered from it: what a task
receives stays bit for bit `data.images_to_tensor`'s values of its own images, whatever the
cache evicted or failed to read before, and the cache is never inherited by a child process."""

from __future__ import annotations

import mmap
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import numpy as np
import pytest

from submission_api.data import images_to_tensor, load_collection
from submission_api.protocols import ProtocolParams
from submission_api.runner.bundle import TaskImages, read_task_plan
from submission_api.runner.channel import SealedArrays
from submission_api.runner.prepare import prepare_run
from submission_api.runner.row_cache import (
    CACHE_SETTING,
    DEFAULT_CACHE_MIB,
    ROW_BYTES,
    RowCache,
    row_cache_bytes,
)
from submission_api.runner.task_payloads import Payloads


class Images:
    """The two things the cache asks of `TaskImages`: the datasets' sizes and a row read."""

    def __init__(self, **datasets: np.ndarray) -> None:
        self.datasets = {name: SimpleNamespace(images=a) for name, a in datasets.items()}
        self.read = 0
        self.fail = False

    def read_rows(self, dataset: str, indices: np.ndarray, out: np.ndarray) -> None:
        if self.fail:
            raise OSError("the compiled entry is gone")
        self.read += len(indices)
        out[...] = self.datasets[dataset].images[indices]


@pytest.fixture
def cache_of() -> Iterator[Callable[[Images, int], RowCache]]:
    """Caches of `rows` rows over `images`, each closed when the test ends."""
    made: list[RowCache] = []

    def make(images: Images, rows: int) -> RowCache:
        made.append(RowCache(cast(TaskImages, images), rows * ROW_BYTES))
        return made[-1]

    yield make
    for cache in made:
        cache.close()


def dataset(seed: int, n: int = 40) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, 128, 128, 3), dtype=np.uint8)


def gathered(cache: RowCache, name: str, *index_lists: list[int]) -> list[np.ndarray] | None:
    outs = [np.full((len(i), 3, 128, 128), np.nan, np.float32) for i in index_lists]
    done = cache.gather(name, [(np.array(i, np.int64), o) for i, o in zip(index_lists, outs,
                                                                         strict=True)])
    return outs if done else None


def converted(images: np.ndarray, indices: list[int]) -> bytes:
    return images_to_tensor(images[np.array(indices, np.int64)]).numpy().tobytes()


def test_gathered_rows_are_the_conversion_bit_for_bit_through_evictions(cache_of):
    a, b = dataset(0), dataset(1, 25)
    images = Images(a=a, b=b)
    cache = cache_of(images, 12)
    rng = np.random.default_rng(2)
    for _ in range(60):
        name, source = ("a", a) if rng.random() < 0.6 else ("b", b)
        distinct = rng.choice(len(source), int(rng.integers(1, 11)), replace=False)
        support = rng.choice(distinct, int(rng.integers(1, 9))).tolist()  # repeats too
        query = rng.choice(distinct, int(rng.integers(0, 9))).tolist()
        outs = gathered(cache, name, support, query)
        assert outs is not None
        assert outs[0].tobytes() == converted(source, support)
        assert outs[1].tobytes() == converted(source, query)
    assert cache.hits and cache.misses > cache.capacity, "no eviction was exercised"
    assert images.read == cache.misses  # each miss read once, each hit not at all


def test_the_least_recently_used_row_goes_first_and_a_gather_never_evicts_its_own(cache_of):
    a = dataset(3, 10)
    images = Images(a=a)
    cache = cache_of(images, 3)
    gathered(cache, "a", [0, 1, 2])
    gathered(cache, "a", [2])
    gathered(cache, "a", [0])
    gathered(cache, "a", [3])  # 1 is the least recently used
    assert images.read == 4
    outs = gathered(cache, "a", [0, 2], [3])
    assert images.read == 4, "0, 2 and 3 were kept"
    assert outs is not None and outs[0].tobytes() == converted(a, [0, 2])
    outs = gathered(cache, "a", [1, 0], [4])  # 1 and 4 in, 2 and 3 out; 0 stays
    assert images.read == 6 and outs is not None
    assert outs[0].tobytes() == converted(a, [1, 0]) and outs[1].tobytes() == converted(a, [4])
    gathered(cache, "a", [0, 1, 4])
    assert images.read == 6


def test_more_distinct_images_than_the_cache_holds_are_left_to_the_caller(cache_of):
    images = Images(a=dataset(4, 10))
    cache = cache_of(images, 3)
    off = cache_of(images, 0)
    assert gathered(cache, "a", [0, 1], [2, 3]) is None
    assert gathered(cache, "a", [0, 1, 0], [1, 2, 2]) is not None  # 3 distinct: fits
    assert gathered(off, "a", [0]) is None
    with pytest.raises(IndexError):
        gathered(cache, "a", [0, 10])
    with pytest.raises(IndexError):
        gathered(cache, "a", [-1])


def test_a_failed_read_leaves_no_image_pointing_at_a_row_it_lacks(cache_of):
    a = dataset(5, 10)
    images = Images(a=a)
    cache = cache_of(images, 4)
    gathered(cache, "a", [0, 1, 2, 3])
    images.fail = True
    with pytest.raises(OSError):
        gathered(cache, "a", [4, 5, 0])  # evicts two of 1, 2, 3 for 4 and 5, then fails
    images.fail = False
    for indices in ([4, 5], [1, 2], [0, 3, 4, 5], [6, 1]):
        outs = gathered(cache, "a", indices)
        assert outs is not None and outs[0].tobytes() == converted(a, indices)


def test_warming_fills_free_rows_in_order_and_never_evicts(cache_of):
    a = dataset(7, 10)
    images = Images(a=a)
    cache = cache_of(images, 5)
    assert cache.warm("a", np.array([0, 1, 2, 1]))
    assert cache.warm("a", np.array([2, 3]))
    assert not cache.warm("a", np.array([4, 5]))  # one free row for two: nothing done
    assert images.read == 4 and not cache.full
    assert cache.warm("a", np.array([4, 0]))
    assert cache.full and images.read == 5
    assert not cache.warm("a", np.array([6]))
    outs = gathered(cache, "a", [4, 3], [0, 1, 2])
    assert images.read == 5 and cache.misses == 0
    assert outs is not None and outs[0].tobytes() == converted(a, [4, 3])
    assert outs[1].tobytes() == converted(a, [0, 1, 2])
    with pytest.raises(IndexError):
        cache.warm("a", np.array([10]))


def _vm_flags(address: int) -> list[str]:
    lines = Path("/proc/self/smaps").read_text().splitlines()
    inside = False
    for line in lines:
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            start, end = (int(x, 16) for x in head.split("-"))
            inside = start <= address < end
        elif inside and head == "VmFlags:":
            return line.split()[1:]
    raise AssertionError(f"no mapping holds {address:#x}")


def test_the_cache_is_never_inherited_by_a_child_process(cache_of):
    cache = cache_of(Images(a=dataset(6, 4)), 4)
    assert "dc" in _vm_flags(cache.rows.ctypes.data)  # MADV_DONTFORK: not copied on fork
    plain = mmap.mmap(-1, 4 * ROW_BYTES, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:  # the check can tell
        view = np.frombuffer(plain, np.uint8)
        assert "dc" not in _vm_flags(view.ctypes.data)
        del view
    finally:
        plain.close()


def _meminfo(tmp_path: Path, available_kib: int | None) -> Path:
    path = tmp_path / "meminfo"
    lines = ["MemTotal:       25000000 kB", "MemFree:         1000000 kB"]
    if available_kib is not None:
        lines.append(f"MemAvailable:   {available_kib:>9} kB")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_bound_is_a_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.delenv(CACHE_SETTING, raising=False)
    default = int(DEFAULT_CACHE_MIB * 2**20)
    # unset: the default on a host with room, an eighth of what is available on a small or
    # busy one (each of a worker's pool slots holds one), the default where nothing says
    assert row_cache_bytes(_meminfo(tmp_path, 20_000_000)) == default
    assert row_cache_bytes(_meminfo(tmp_path, 1_048_576)) == 128 * 2**20
    assert row_cache_bytes(_meminfo(tmp_path, None)) == default
    assert row_cache_bytes(tmp_path / "absent") == default
    monkeypatch.setenv(CACHE_SETTING, "512")  # set: the operator's, whatever is available
    assert row_cache_bytes(_meminfo(tmp_path, 1_048_576)) == 512 * 2**20
    monkeypatch.setenv(CACHE_SETTING, "0")
    assert row_cache_bytes() == 0
    monkeypatch.setenv(CACHE_SETTING, "1.5")
    assert row_cache_bytes() == 3 * 2**19
    for wrong in ("-1", "nan", "lots"):
        monkeypatch.setenv(CACHE_SETTING, wrong)
        with pytest.raises(ValueError, match="expected a number of MiB >= 0"):
            row_cache_bytes()


def _read(payload: SealedArrays) -> list[bytes]:
    with mmap.mmap(payload.fd, payload.size, prot=mmap.PROT_READ) as view:
        return [bytes(view[e["offset"]: e["offset"] + int(np.prod(e["shape"]))
                           * np.dtype(e["dtype"]).itemsize]) for e in payload.layout]


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory, tiny_collection: Path,
            arena_cache: Path) -> Path:
    """A run's task plan: 12 cross-domain tasks of two datasets."""
    root = tmp_path_factory.mktemp("row-cache")
    protocol = ProtocolParams.from_dict({"name": "cross-domain", "tasks_per_dataset": 6})
    collection = load_collection(tiny_collection, arena_cache)
    prepare_run(collection, protocol, (0, 0), root / "bundle", root / "answers")
    return root / "answers"


@pytest.mark.parametrize(("rows", "warmed"), [(0, False), (6, False), (40, False), (40, True),
                                              (4000, False), (4000, True)],
                         ids=["off", "smaller-than-tasks", "evicting", "evicting-warmed",
                              "whole-run", "whole-run-warmed"])
def test_each_task_receives_its_own_images_converted(answers: Path, rows: int, warmed: bool):
    plan = read_task_plan(answers)
    payloads = Payloads(TaskImages(plan), rows * ROW_BYTES)
    reference = TaskImages(plan)
    try:
        if warmed:
            payloads.warm()
            payloads._cutter.submit(lambda: None).result()  # after it, asking no cut
        for task in plan.tasks:
            payload = payloads.take(task)
            try:
                support, labels, query = _read(payload)
            finally:
                payload.close()
            payloads.release(task.id)
            s, y, q = reference.cut(task)
            assert support == images_to_tensor(s).numpy().tobytes()
            assert labels == np.ascontiguousarray(y, np.int64).tobytes()
            assert query == images_to_tensor(q).numpy().tobytes()
        if rows == 4000:
            assert payloads.rows.hits > payloads.rows.misses  # images repeat across tasks
            assert payloads.rows.misses == 0 or not warmed  # every image was in before
    finally:
        payloads.close()
        reference.close()
