"""A hostile submission that keeps the cooc cheat's memory in the page cache (issue 34.1).

It never looks at a pixel's meaning. In each test task it hashes the images; for every query
image q and every class present (named by the smallest digest of its support images: with all
of a class's support pool shown, the same in every task), it counts in a Bloom filter of page
residency how many tasks q has shared with that class. The true class shares every task q is in;
another only some, so the class with the highest count is q's. The filter is the residency of
the pages of files it can read but not write: a large shipped low-entropy file (a few hundred
KB zipped, within the zip's ratio bound) and a learner file meta-train wrote with O_DIRECT
(past the page cache, so that its pages start out not resident). Reading a counter is touching
its pages in order through a MADV_RANDOM mapping (no read-ahead) and counting major faults
(`getrusage`, not an oracle anyone can refuse): the first page not resident ends the count
and, touched, becomes resident: the counter went up by one. A counter reads the smaller of
its two files' counts (a file whose pages are all resident reads every counter full).

Where residency carries between tasks (the files read in place, their pages evictable) it scores
far above chance (`score_with_page_cache`); where every page the task can read is resident from
before the first task (the private tmpfs copy, the worker's pre-fault), every counter reads full,
every query the same label, and it scores at chance. Importable by name: tests put this folder on
sys.path.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

SHIPPED_MB = 128
"""The shipped file's size (the issue's was 512 MiB; 32,768 pages carry this cheat's ~3,000)."""

ATTACK_MODEL = r'''
import hashlib, mmap, os, resource, sys
import numpy as np
from submission_api.api import Learner, MetaLearner, Predictor

PAGE, CAP = 4096, 4
HERE = os.path.dirname(os.path.abspath(__file__))
STORES = [os.path.join(HERE, "bloom.bin")]
LEARNER_BYTES = SHIPPED_BYTES


def _faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_majflt


class Residency:
    """One file's pages as a Bloom filter of counters (module docstring)."""

    def __init__(self, path):
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            self.view = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        self.view.madvise(mmap.MADV_RANDOM)
        self.pages = size // PAGE
        self.cold = self.touched = 0

    def count(self, key):
        """How many of the key's pages are resident in order; the first one that is not is
        touched (the counter goes up by one)."""
        for j in range(CAP):
            digest = hashlib.blake2b(f"{key}|{j}".encode(), digest_size=8).digest()
            page = int.from_bytes(digest, "little") % self.pages
            before = _faults()
            self.view[page * PAGE]
            self.touched += 1
            if _faults() != before:
                self.cold += 1
                return j
        return CAP

    def close(self):
        self.view.close()


def _stores(learner):
    found = []
    for path in [*STORES, *([os.path.join(learner, "bloom.bin")] if learner else [])]:
        try:
            found.append(Residency(path))
        except (OSError, ValueError):
            pass
    return found


def _digest(image):
    return hashlib.sha1(np.ascontiguousarray(image.numpy()).tobytes()).hexdigest()[:16]


class MyPredictor(Predictor):
    def __init__(self, classes, stores):
        self.classes, self.stores = classes, stores

    def predict(self, query_set):
        predictions = []
        for image in query_set:
            q = _digest(image)
            counts = [min([s.count(f"{q}|{c}") for s in self.stores] or [CAP])
                      for c in self.classes]
            best = max(counts)
            predictions.append(counts.index(best))
        cold = sum(s.cold for s in self.stores)
        touched = sum(s.touched for s in self.stores)
        sys.stderr.write(f"PAGE-CACHE-ATTACK cold {cold} of {touched} touched\n")
        for store in self.stores:
            store.close()
        return np.array(predictions)


class MyLearner(Learner):
    def __init__(self):
        self.folder = None

    def fit(self, support_set):
        images, labels, _, n_ways, _ = support_set
        digests = {}
        for image, label in zip(images, labels.tolist()):
            digests.setdefault(label, []).append(_digest(image))
        classes = [min(digests.get(label, ["none"])) for label in range(n_ways)]
        return MyPredictor(classes, _stores(self.folder))

    def save(self, path):
        target = os.path.join(path, "bloom.bin")
        block = mmap.mmap(-1, 1 << 20)  # page-aligned, as O_DIRECT needs
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
        except OSError:  # no O_DIRECT here: written through the page cache
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for _ in range(LEARNER_BYTES >> 20):
                os.write(fd, block)
        finally:
            os.close(fd)

    def load(self, path):
        self.folder = path


class MyMetaLearner(MetaLearner):
    def meta_fit(self, meta_train_generator, meta_valid_generator):
        return MyLearner()
'''


def shipped_file(size_mb: int = SHIPPED_MB) -> bytes:
    """Low-entropy bytes: zeros with a random byte every 384 (about 100x in the zip, under its
    200x bound)."""
    data = np.zeros(size_mb << 20, np.uint8)
    where = np.arange(0, data.size, 384)
    data[where] = np.random.default_rng(34).integers(0, 256, where.size, dtype=np.uint8)
    return data.tobytes()


def write_attack(folder: Path, size_mb: int = SHIPPED_MB) -> Path:
    """The submission folder: model.py and the shipped file."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.py").write_text(
        ATTACK_MODEL.replace("SHIPPED_BYTES", str(size_mb << 20)))
    (folder / "bloom.bin").write_bytes(shipped_file(size_mb))
    return folder


def evict(path: Path) -> None:
    """Drop `path`'s pages from the page cache (what host memory pressure does in time)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd) if os.access(path, os.W_OK) else None
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def score_with_page_cache(folder: Path, learner: Path, answers_dir: Path,
                          copy_space: Path | None = None) -> float:
    """The attack's mean normalized accuracy when its files' pages start out evicted and are
    read in place (`copy_space` None) or from the run's private copy made on that tmpfs as the
    supervisor makes it: each task gets a fresh `MyLearner` loaded from the learner folder and
    fresh mappings (the module keeps no state between tasks: only the page cache carries)."""
    import torch
    from isolation_attack import load_attack

    from submission_api.data import images_to_tensor
    from submission_api.runner.bundle import TaskImages, read_answers, read_task_plan
    from submission_api.scoring import compute_normalized_bac

    module = load_attack(folder, "isolation_page_cache_attack_model")
    learner.mkdir(parents=True, exist_ok=True)
    module.MyLearner().save(str(learner))
    for path in (folder / "bloom.bin", learner / "bloom.bin"):
        evict(path)
    copies = []
    if copy_space is not None:
        from submission_api.runner import private_copy

        copies = private_copy.make([folder, learner], copy_space)
        module.STORES = [str(copies[0] / "bloom.bin")]
        learner = copies[1]
    plan = read_task_plan(answers_dir)
    tasks, labels = read_answers(answers_dir)
    images = TaskImages(plan)
    scores = []
    try:
        for task, answer in zip(plan.tasks, tasks, strict=True):
            support, support_labels, query = images.cut(task)
            y = torch.from_numpy(np.array(support_labels))
            fresh = module.MyLearner()
            fresh.load(str(learner))
            predictor = fresh.fit((images_to_tensor(support), y, y, task.n_ways, task.n_shots))
            predicted = predictor.predict(images_to_tensor(query))
            truth = labels[answer.query_offset: answer.query_offset + answer.n_query]
            scores.append(compute_normalized_bac(predicted, truth, task.n_ways))
    finally:
        images.close()
        if copies:
            from submission_api.runner import private_copy

            private_copy.remove(copies[0].parent)
    return float(np.mean(scores))
