"""One test task's process, forked by the supervisor: confine, receive this task (and only this
one) as a sealed file on its socket, its images already float32 tensors (`runner/task_files.py`),
wait for the trusted side's release, then import the submission, load the learner, fit,
predict, answer, exit.

Where tasks have their own namespaces the task arrives ahead, while the previous task still runs
(issue 38): its file is mapped then, our code only. Nothing of the submission runs before the
release, which the trusted side sends only once the previous task is gone and swept
(`task_server`).

Seeds depend on the run's participant seed and the task id only, so a task computes the same in
any process, locally or on the platform, whatever ran before it.
"""

from __future__ import annotations

import contextlib
import random
import socket
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from submission_api.runner.channel import (
    ChannelError,
    receive_message,
    receive_sealed,
    send_message,
)
from submission_api.runner.namespaces import TaskWorld

TENSOR_SHAPE = (3, 128, 128)
"""A task's images as its process gets them: float32 `[n, 3, 128, 128]` (`images_to_tensor`)."""
TASK_MAX_BYTES = 1 << 31
"""The trusted side is the only peer; this bounds a corrupted stream, not an attacker."""


def seed_task(seed: int, task_id: int) -> None:
    import torch

    from submission_api.sampling.seeds import compute_seed_words

    state = compute_seed_words(seed, task_id)
    random.seed(int(state[0]))
    np.random.seed(int(state[0]) % (2**32))
    torch.manual_seed(int(state[0]))


def to_prediction_array(predictions: Any, n_query: int, n_ways: int) -> np.ndarray:
    """A numeric array from what `predict` returned (tensor, array or list)."""
    import torch

    if isinstance(predictions, torch.Tensor):
        predictions = predictions.detach().cpu().numpy()
    array: np.ndarray | None
    try:
        array = np.asarray(predictions)
        cause = f" of dtype {array.dtype}"
    except ValueError as error:  # ragged lists
        array, cause = None, f" ({error})"
    if array is None or array.dtype == object or array.dtype.kind not in "biuf":
        raise TypeError(
            f"predict returned {type(predictions).__name__}{cause}; return a numeric numpy "
            f"array of labels [{n_query}] or scores [{n_query}, {n_ways}]")
    return array


def _answer_error(sock: socket.socket, stage: str, error: BaseException) -> None:
    trace = "".join(traceback.format_exception(error))
    with contextlib.suppress(OSError):
        send_message(sock, {"type": "error", "stage": stage,
                            "error": (str(error) or type(error).__name__)[:4000],
                            "traceback": trace[-20000:]})


def confine_task(scratch: list[Path], sandboxed: bool = False,
                 private_namespaces: bool = False, world: TaskWorld | None = None) -> None:
    """Confine this task's process (read-only view, capabilities, Landlock, seccomp) and set
    its heap; our code only, so it may run before the task is known (`runner/forkserver.py`).

    `private_namespaces`: the supervisor found that namespaces can be made here and sweeps
    this machine's IPC no more, so a task whose namespaces (`world`, entered by the fork
    server's child before this process was forked) are missing must not run.
    """
    from submission_api.runner import heap, isolation, seccomp

    if private_namespaces and world is None:
        raise RuntimeError("the task's process could not enter its own namespaces")
    # Writable: the scratch folders, and the places on a fresh tmpfs of this task's own; the
    # sandbox's /dev/shm, which the supervisor empties after every task, even when shared;
    # never the shared /dev/shm of a workstation.
    fresh = list(world.fresh) if world is not None else []
    writable = list(dict.fromkeys([*scratch, *fresh, *([Path("/dev/shm")] if sandboxed else [])]))
    if world is not None:
        isolation.make_read_only_view(writable)
    isolation.drop_capabilities()
    isolation.confine(writable)
    seccomp.deny_page_cache_control()  # and namespaces, mounts; see runner/seccomp.py
    heap.keep_freed_memory()


def await_release(sock: socket.socket) -> None:
    """Until the trusted side releases this task (`{"type": "go"}` on its socket).

    Raises:
        ChannelError: the socket ended (the run stopped before this task's turn) or carried
            something else.
    """
    header, arrays = receive_message(sock, 0)
    if header.get("type") != "go" or arrays:
        raise ChannelError(f"expected the task's release, got {str(header)[:200]}")


def run_task(fd: int, task_id: int, submission: Path, learner_dir: Path, seed: int,
             threads: int) -> int:
    """Everything one confined task's process does with its task; returns its exit code (0:
    predictions sent)."""
    sock = socket.socket(fileno=fd)
    sock.setblocking(True)
    import torch

    from submission_api.runner.participant import import_submission

    torch.set_num_threads(max(1, threads))
    seed_task(seed, task_id)
    stage = "receive"
    try:
        # Sent with the task's socket (ahead, where the previous task still runs): the tensors,
        # converted by the trusted side into a file it reuses (runner/task_files.py), mapped
        # copy-on-write: nothing to convert here, no fresh memory to fault in for them.
        header, (support_images, support_labels, query_images) = receive_sealed(
            sock, TASK_MAX_BYTES, writable=True)
        for images in (support_images, query_images):
            if images.dtype != np.float32 or images.shape[1:] != TENSOR_SHAPE:
                raise ChannelError(f"the task's images came as {images.dtype} "
                                   f"{list(images.shape)}; expected float32 [n, 3, 128, 128]")
        n_ways, n_query = int(header["n_ways"]), len(query_images)
        y = torch.from_numpy(support_labels.astype(np.int64))
        support = (torch.from_numpy(support_images), y, y.clone(), n_ways,
                   int(header["n_shots"]))
        query = torch.from_numpy(query_images)
        del support_images, query_images, support_labels
        await_release(sock)
        stage = "import"
        _, my_learner = import_submission(submission)
        stage = "load"
        learner = my_learner()
        learner.load(str(learner_dir))
        stage = "fit"
        predictor = learner.fit(support)
        stage = "predict"
        array = to_prediction_array(predictor.predict(query), n_query, n_ways)
        send_message(sock, {"type": "predictions"}, [array])
    except (ChannelError, ValueError) as error:
        if stage == "receive":
            return 3  # the trusted side went away: nothing to answer
        _answer_error(sock, stage, error)
        return 1
    except BaseException as error:  # noqa: BLE001 - any participant failure is reported
        _answer_error(sock, stage, error)
        return 1
    return 0
