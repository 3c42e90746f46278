"""The meta-train side of a run: imports the submission, meta-trains it on the meta-train view and
saves the learner once into `output/learner`. On the platform this runs in its own sandbox; `arena
run` runs it as a subprocess. It reads only `bundle/` and the submission and writes only
`output/`; no test task exists anywhere it can reach. Meta-test happens afterwards, one task per
process (`submission_api.runner.supervisor`), with this learner mounted read-only.

Usage: python -m submission_api.runner.participant --submission DIR --bundle DIR --output DIR
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

COMPAT_DIR = Path(__file__).resolve().parents[1] / "compat"


class StageFailed(Exception):
    """Participant code raised during a stage; carries the stage and the task, if any."""

    def __init__(self, stage: str, task: int | None, cause: BaseException) -> None:
        super().__init__(f"{type(cause).__name__} in {stage}: {cause}")
        self.stage, self.task, self.cause = stage, task, cause


class StatusWriter:
    """Writes status.json and progress.json atomically, so a reader never sees half a file."""

    def __init__(self, output_dir: Path) -> None:
        self.output_dir = output_dir
        self.started = time.monotonic()

    def _write(self, name: str, content: dict) -> None:
        temp = self.output_dir / f".{name}.tmp"
        temp.write_text(json.dumps(content))
        os.replace(temp, self.output_dir / name)

    def status(
        self,
        stage: str,
        error: str | None = None,
        trace: str | None = None,
        task: int | None = None,
    ) -> None:
        self._write(
            "status.json", {"stage": stage, "error": error, "traceback": trace, "task": task}
        )

    def progress(self, stage: str, done: int, total: int | None) -> None:
        elapsed = round(time.monotonic() - self.started, 3)
        self._write(
            "progress.json", {"stage": stage, "done": done, "total": total, "elapsed_s": elapsed}
        )


def seed_everything(participant_seed: int) -> np.random.Generator:
    """Seed Python, NumPy and torch from the run's participant seed; return the meta-train data
    generator. The test seed is never known here (run.json carries only this one)."""
    from submission_api.sampling.seeds import compute_seed_words

    state = compute_seed_words(participant_seed, words=2)
    random.seed(int(state[0]))
    np.random.seed(int(state[0]) % (2**32))
    torch.manual_seed(int(state[0]))
    return np.random.default_rng(int(state[1]))


def import_submission(submission_dir: Path) -> tuple[type, type]:
    """Import `model.py` with the NeurIPS'22 names (`api`, `cdmetadl`) on the path.

    Raises:
        ImportError: model.py is missing (the message says where it was looked for), or defines
            neither class.
    """
    if not (submission_dir / "model.py").is_file():
        raise ImportError(f"model.py is missing: looked for {submission_dir / 'model.py'}; the "
                          "submission folder (or the zip's top level) must hold model.py")
    sys.path[:0] = [str(submission_dir), str(COMPAT_DIR)]
    module = importlib.import_module("model")
    missing = [n for n in ("MyMetaLearner", "MyLearner") if not hasattr(module, n)]
    if missing:
        raise ImportError(
            f"model.py defines no {' and no '.join(missing)}; define both classes "
            "(see the starting kit's tutorial)"
        )
    return module.MyMetaLearner, module.MyLearner


def _counting(
    generator: Callable[[int], Iterator[Any]] | None, status: StatusWriter
) -> Callable[[int], Iterator[Any]] | None:
    """Wrap a generator so each item drawn is counted in progress.json (throttled)."""
    if generator is None:
        return None
    drawn, reported = 0, 0.0

    def counted(n: int) -> Iterator[Any]:
        nonlocal drawn, reported
        for item in generator(n):
            drawn += 1
            if time.monotonic() - reported > 1.0:
                reported = time.monotonic()
                status.progress("meta_fit", drawn, None)
            yield item

    return counted


def meta_train(
    my_meta_learner: type,
    submission_dir: Path,
    bundle_dir: Path,
    output_dir: Path,
    rng: np.random.Generator,
    status: StatusWriter,
) -> None:
    """Meta-train on the bundle's views and save the learner into output/learner."""
    from submission_api.config import load_submission_config
    from submission_api.data import open_compiled
    from submission_api.logger import Logger
    from submission_api.sampling.meta_train import build_meta_generators, compute_train_classes

    def open_view(folder: str) -> list:
        root = bundle_dir / folder
        return (
            [open_compiled(p) for p in sorted(root.iterdir()) if p.is_dir()]
            if root.is_dir()
            else []
        )

    stage = "config"
    try:
        # config.json asks for task shapes; one the meta-train view cannot serve is the
        # submission's to fix, so it is reported like any participant error, with its message.
        config = load_submission_config(submission_dir)
        train_sets, valid_sets = open_view("meta_train"), open_view("meta_valid")
        train_gen, valid_gen = build_meta_generators(train_sets, valid_sets, config, rng)
        # The NeurIPS'22 kit counts only the datasets left for meta-training.
        train_classes, total_classes = compute_train_classes(train_gen.datasets, config)
        stage = "meta_fit"
        meta_learner = my_meta_learner(train_classes, total_classes, Logger(output_dir / "logs"))
        learner = meta_learner.meta_fit(_counting(train_gen, status), _counting(valid_gen, status))
        stage = "save"
        (output_dir / "learner").mkdir(exist_ok=True)
        learner.save(str(output_dir / "learner"))
    except Exception as error:  # noqa: BLE001 - any participant exception is reported, not raised
        raise StageFailed(stage, None, error) from error


def run(submission_dir: Path, bundle_dir: Path, output_dir: Path) -> int:
    """Import, meta-train and save; return the process exit code (0 done, 1 participant failure)."""
    output_dir.mkdir(parents=True, exist_ok=True)
    status = StatusWriter(output_dir)
    info = json.loads((bundle_dir / "run.json").read_text())
    torch.set_num_threads(max(1, int(info.get("threads", 1))))
    rng = seed_everything(int(info["participant_seed"]))
    try:
        status.status("import")
        try:
            my_meta_learner, _ = import_submission(submission_dir)
        except BaseException as error:  # noqa: BLE001 - SystemExit at import is a failure too
            raise StageFailed("import", None, error) from error
        status.status("meta_fit")
        meta_train(my_meta_learner, submission_dir, bundle_dir, output_dir, rng, status)
    except StageFailed as failed:
        trace = "".join(traceback.format_exception(failed.cause))
        status.status(
            failed.stage, str(failed.cause) or type(failed.cause).__name__, trace, failed.task
        )
        print(f"[arena] {failed} (stage {failed.stage})\n{trace}", file=sys.stderr, flush=True)
        return 1
    status.status("done")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--submission", type=Path, required=True)
    parser.add_argument("--bundle", type=Path, required=True)
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args(argv)
    return run_reaped(args.submission.resolve(), args.bundle.resolve(), args.output.resolve())


def run_reaped(submission_dir: Path, bundle_dir: Path, output_dir: Path) -> int:
    """`run` in a child process; this parent, which never imports participant code, then kills
    every process meta-training left (it is their subreaper), so nothing of meta-train is alive
    when the test tasks begin (in the sandbox its IPC dies with its container). The child
    takes the residency-oracle filter of the test tasks (`runner/seccomp.py`) before any
    participant code: meta-train of one run must not read what another run left in the page
    cache, nor steer it (issue 34)."""
    from submission_api.runner import isolation, seccomp, sweep

    isolation.protect_supervisor()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            seccomp.deny_page_cache_control()
            code = run(submission_dir, bundle_dir, output_dir)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    sweep.kill_descendants()
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


if __name__ == "__main__":
    sys.exit(main())
