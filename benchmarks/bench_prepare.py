"""Meta-test bundle preparation speed: `runner.prepare.prepare_run` and `bundle.write_meta_test`
against a naive writer that decodes every image file of every task, the previous memory-mapped
writer, and two physical limits that move the same bytes.

"The same bytes" are the uint8 bundle bytes: 128*128*3 per support or query image. The limits
are (a) a plain memory copy of that many bytes per task into a reused buffer, and (b) one
contiguous `write` of that many bytes per task to a file beside the bundle. The bundle is written
to /dev/shm where it exists, so that the figures measure the code, not the disk.

    .venv/bin/python benchmarks/bench_prepare.py [--tasks 24] [--naive-tasks 3] [--rounds 4]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import mmap
import shutil
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np
from bench_task_generation import DOMAINS, source_files
from benchlib import measure_best_rates, print_rates, scratch_dir
from PIL import Image

from starting_kit.sample_data import generate_collection
from submission_api.data import CompiledDataset, load_collection
from submission_api.protocols import ProtocolParams, plan_test_episodes
from submission_api.runner.bundle import AnswerTask, BundleTask, write_meta_test
from submission_api.runner.prepare import prepare_run
from submission_api.sampling import Episode

IMAGE_BYTES = 128 * 128 * 3
SEED = (0, 1)
"""(test seed, participant seed), as `prepare_run` takes them."""


def write_meta_test_memmap(episodes: Sequence[Episode], datasets: dict[str, CompiledDataset],
                           bundle_dir: Path, answers_dir: Path) -> None:
    """The previous writer, kept for a side-by-side before/after: output files as writable
    memory maps, rows gathered in file order into a fresh array, then copied in."""
    test_dir = bundle_dir / "meta_test"
    test_dir.mkdir(parents=True)
    answers_dir.mkdir(parents=True)
    n_s = sum(len(e.support_idx) for e in episodes)
    n_q = sum(len(e.query_idx) for e in episodes)
    support = np.memmap(test_dir / "support_images.u8", np.uint8, "w+", shape=(n_s, 128, 128, 3))
    query = np.memmap(test_dir / "query_images.u8", np.uint8, "w+", shape=(n_q, 128, 128, 3))
    s_labels, q_labels = np.empty(n_s, np.int64), np.empty(n_q, np.int64)
    tasks, answers, s_at, q_at = [], [], 0, 0
    for task_id, e in enumerate(episodes):
        images = datasets[e.dataset].images
        s_n, q_n = len(e.support_idx), len(e.query_idx)
        for idx, out, at in ((e.support_idx, support, s_at), (e.query_idx, query, q_at)):
            order = np.argsort(idx, kind="stable")
            rows = np.empty((len(idx), 128, 128, 3), np.uint8)
            rows[order] = images[idx[order]]
            out[at : at + len(idx)] = rows
        s_labels[s_at : s_at + s_n], q_labels[q_at : q_at + q_n] = e.support_labels, e.query_labels
        tasks.append(BundleTask(task_id, e.n_ways, e.n_shots, s_n, q_n, s_at, q_at))
        answers.append(AnswerTask(task_id, e.dataset, e.group, e.n_ways, e.n_shots, q_at, q_n))
        s_at, q_at = s_at + s_n, q_at + q_n
    support.flush()
    query.flush()
    np.save(test_dir / "support_labels.npy", s_labels)
    (test_dir / "tasks.json").write_text(json.dumps([asdict(t) for t in tasks]))
    np.save(answers_dir / "query_labels.npy", q_labels)
    (answers_dir / "tasks.json").write_text(json.dumps([asdict(a) for a in answers]))


def write_naive(episodes: Sequence[Episode], files: dict[str, list[Path]], out_dir: Path) -> None:
    """The reference: decode, convert and resize every image file of every task (PIL), then
    append its uint8 pixels to the bundle files."""
    out_dir.mkdir(parents=True)
    with (out_dir / "support_images.u8").open("wb") as support, \
            (out_dir / "query_images.u8").open("wb") as query:
        for e in episodes:
            for idx, target in ((e.support_idx, support), (e.query_idx, query)):
                for i in idx:
                    with Image.open(files[e.dataset][i]) as img:
                        target.write(np.asarray(img.convert("RGB").resize((128, 128))).tobytes())


def count_images(episodes: Sequence[Episode]) -> int:
    """Support plus query images of the episodes."""
    return sum(len(e.support_idx) + len(e.query_idx) for e in episodes)


def in_fresh_dir(base: Path, work: Callable[[Path], None], images: int) -> Callable[[], int]:
    """A round of `work` into `base/round`, which the benchmark's cleanup removes untimed."""
    def round_() -> int:
        work(base / "round")
        return images
    return round_


def make_limits(episodes: Sequence[Episode], base: Path) -> dict[str, Callable[[], int]]:
    """Physical limits moving each task's uint8 bundle bytes: a memory copy into a reused
    buffer (bandwidth alone), one into fresh pages (what any new output costs: the kernel must
    provide and zero every page), and a file write (what a bundle costs at least)."""
    sizes = [n * IMAGE_BYTES for e in episodes for n in (len(e.support_idx), len(e.query_idx))]
    source = np.ones(max(sizes), np.uint8)
    target = np.empty_like(source)
    images = count_images(episodes)

    def memcpy() -> int:
        for n in sizes:
            np.copyto(target[:n], source[:n])
        return images

    def memcpy_fresh() -> int:
        for n in sizes:
            with mmap.mmap(-1, n) as pages:  # anonymous: new pages every time
                np.frombuffer(pages, np.uint8)[:] = source[:n]
        return images

    def file_write(path: Path) -> None:
        path.mkdir(parents=True)
        with (path / "bytes.u8").open("wb") as out:
            for n in sizes:
                out.write(memoryview(source[:n]))

    return {"memcpy, same uint8 bytes (limit)": memcpy,
            "memcpy into fresh pages, same bytes": memcpy_fresh,
            "file write, same uint8 bytes": in_fresh_dir(base, file_write, images)}


def digest_bundle(bundle_dir: Path) -> str:
    """sha256 over the meta-test files, to check that every writer wrote the same bundle."""
    h = hashlib.sha256()
    for name in ("support_images.u8", "query_images.u8", "support_labels.npy", "tasks.json"):
        h.update((bundle_dir / "meta_test" / name).read_bytes())
    return h.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=24, help="test tasks per run")
    parser.add_argument("--naive-tasks", type=int, default=3, help="tasks for the naive writer")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    with scratch_dir("arena-bench-prepare-") as tmp:
        base = Path(tmp)
        col = generate_collection(base / "col", seed=0, domains=DOMAINS)
        collection = load_collection(col, base / "cache")
        files = {d.name: source_files(col, d) for d in collection.datasets.values()}
        protocol = ProtocolParams(tasks_per_dataset=args.tasks)
        episodes = plan_test_episodes(protocol, collection, SEED[0])
        naive_episodes = episodes[: args.naive_tasks]
        images = count_images(episodes)

        def run_prepare(path: Path) -> None:
            prepare_run(collection, protocol, SEED, path / "bundle", path / "answers")

        def run_writer(path: Path) -> None:
            write_meta_test(episodes, collection.datasets, path / "bundle", path / "answers")

        def run_previous(path: Path) -> None:
            write_meta_test_memmap(episodes, collection.datasets, path / "bundle", path / "answers")

        for check, writer in enumerate((run_writer, run_previous)):
            writer(base / f"check{check}")
        assert digest_bundle(base / "check0" / "bundle") == digest_bundle(
            base / "check1" / "bundle"), "the writers disagree"
        shutil.rmtree(base / "check0")
        shutil.rmtree(base / "check1")
        rates = measure_best_rates({
            "naive (decode every file per task)": in_fresh_dir(
                base, lambda p: write_naive(naive_episodes, files, p),
                count_images(naive_episodes)),
            "prepare_run (views + plan + bundle)": in_fresh_dir(base, run_prepare, images),
            "write_meta_test": in_fresh_dir(base, run_writer, images),
            "previous writer (memory-mapped output)": in_fresh_dir(base, run_previous, images),
            **make_limits(episodes, base),
        }, rounds=args.rounds, cleanup=lambda: shutil.rmtree(base / "round", ignore_errors=True))
    print(f"{len(episodes)} cross-domain test tasks, {images / len(episodes):.0f} images per task "
          f"on average, {images * IMAGE_BYTES / 2**20:,.0f} MiB of uint8 bundle images")
    print_rates(rates, "images")
    naive, prepare, writer, previous, memcpy, fresh, write = rates.values()
    print(f"prepare_run     / naive         = {prepare / naive:7.1f}x  (aim >= 20x)")
    print(f"write_meta_test / naive         = {writer / naive:7.1f}x")
    print(f"file write      / naive         = {write / naive:7.1f}x  (ceiling of any writer)")
    print(f"write_meta_test / memcpy        = {writer / memcpy:7.3f}   (aim >= 0.33, within 3x)")
    print(f"write_meta_test / fresh memcpy  = {writer / fresh:7.3f}")
    print(f"write_meta_test / file write    = {writer / write:7.3f}")
    print(f"prepare_run     / file write    = {prepare / write:7.3f}")
    print(f"write_meta_test / previous      = {writer / previous:7.2f}x  (before/after)")


if __name__ == "__main__":
    main()
