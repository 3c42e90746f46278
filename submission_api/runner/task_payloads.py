"""The trusted side's test tasks on their way to their processes: each task's sealed file, cut one
task ahead in a thread of its own (`Payloads`), its hand-over to the supervisor and its process
(`start_task`; the next task's, while the current one runs: its socket at once, `hand_socket`,
its images once cut, `finish_ahead`), and a task whose process has its socket and its images
and waits for its release (`Started`). Used by `task_server`, which sends the release (`go`).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from submission_api.runner.bundle import IMAGE_SHAPE, AnswerTask, TaskImages
from submission_api.runner.channel import (
    ChannelError,
    SealedArrays,
    layout_of,
    send_control,
    send_sealed,
)
from submission_api.runner.row_cache import RowCache, row_cache_bytes
from submission_api.runner.task_files import TaskFiles


class TaskDataError(Exception):
    """The trusted side could not read or cut the run's test tasks: the platform's fault, never
    charged to the participant."""


def task_specs(task: AnswerTask) -> list[tuple[np.dtype, tuple[int, ...]]]:
    """What a task's process receives: float32 support images `[n, 3, 128, 128]` in [0, 1]
    (`data.images_to_tensor`'s values, bit for bit), int64 labels, float32 query images."""
    shape = (3, *IMAGE_SHAPE[:2])
    return [(np.dtype(np.float32), (task.n_support, *shape)),
            (np.dtype(np.int64), (task.n_support,)),
            (np.dtype(np.float32), (task.n_query, *shape))]


def convert_into(images: np.ndarray, out: np.ndarray) -> None:
    """uint8 `[n, 128, 128, 3]` -> float32 `[n, 3, 128, 128]` / 255 into `out`: the values of
    `data.images_to_tensor`, bit for bit (the same numpy pass)."""
    np.divide(images.transpose(0, 3, 1, 2), np.float32(255), out=out, dtype=np.float32)


class Payloads:
    """Each task's file, cut in a thread of its own ahead of where it is needed, so neither the
    release of a task nor the reading of its answer waits for a cut; the same thread starts the
    next task (`submit`). The files are reused (`runner/task_files.py`): a task's is written
    again only once `release`d; at most three are held at a time (the running task's, the next
    one's, the one cut ahead). Each distinct image is converted once per run where the row
    cache holds it (`runner/row_cache.py`, `ARENA_ROW_CACHE_MIB`), and copied from there."""

    def __init__(self, images: TaskImages, cache_bytes: int | None = None) -> None:
        self.images = images
        self.rows = RowCache(images, row_cache_bytes() if cache_bytes is None else cache_bytes)
        self.files = TaskFiles(max((layout_of(task_specs(t))[1] for t in images.plan.tasks),
                                   default=0))
        self._ahead: tuple[int, Future[SealedArrays]] | None = None
        self._cutter = ThreadPoolExecutor(1, thread_name_prefix="arena-task-cutter")
        self._cutting = threading.Lock()  # `images.cut` reuses its buffers
        self._cut_asked = threading.Event()
        """A cut or a start was asked for: warming the row cache stops."""

    def warm(self) -> None:
        """Fill the row cache with the images of the run's tasks, in their order, in the cutting
        thread, until it is full or the first cut is asked for: the supervisor's start (its
        fork server's imports, about a second) leaves the trusted side idle, and the first
        tasks' cuts are then copies. A failure here is nobody's: each task is cut at its turn,
        with its error then."""
        if self.rows.capacity:
            self._cutter.submit(self._warm)

    def _warm(self) -> None:
        plan = self.images.plan
        for task in plan.tasks:
            if self._cut_asked.is_set() or self.rows.full:
                return
            indices = np.concatenate([plan.window("support_index", task),
                                      plan.window("query_index", task)])
            with self._cutting:
                try:
                    if not self.rows.warm(task.dataset, indices):
                        return
                except Exception:  # noqa: BLE001 - cut again at its turn, its error then
                    return

    def take(self, task: AnswerTask) -> SealedArrays:
        """`task`'s file: the one cut ahead, or cut now.

        Raises:
            TaskDataError: the platform cannot read the task's images.
        """
        self._cut_asked.set()
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            payload = result_or_none(ahead[1])
            if ahead[0] == task.id and payload is not None:
                return payload
            if payload is not None:
                payload.close()
            self.files.release(ahead[0])
        try:
            return self._cut(task)
        except Exception as error:  # noqa: BLE001 - the compiled data is ours, not theirs
            raise TaskDataError(f"the platform could not prepare the images of test task "
                                f"{task.id}: {type(error).__name__}: {error}") from error

    def cut_ahead(self, task: AnswerTask | None) -> None:
        """Start cutting `task` for later. A failure there is not the running task's: nothing
        is kept, and the task is cut again, with its error then, when its turn comes."""
        self._cut_asked.set()
        if task is None or self._ahead is not None:
            return
        self._ahead = (task.id, self._cutter.submit(self._cut, task))

    def _cut(self, task: AnswerTask) -> SealedArrays:
        """`task`'s tensors, converted from its images into a free file (in the cutting thread,
        or at the task's turn when the cut ahead failed)."""
        def fill(views: list[np.ndarray]) -> None:
            plan = self.images.plan
            if self.rows.gather(task.dataset,
                                [(plan.window("support_index", task), views[0]),
                                 (plan.window("query_index", task), views[2])]):
                views[1][...] = plan.window("support_labels", task)
                return
            support, labels, query = self.images.cut(task)  # more images than the cache holds
            convert_into(support, views[0])
            views[1][...] = labels
            convert_into(query, views[2])

        with self._cutting:
            return self.files.write(task.id, task_specs(task), fill)

    def release(self, task_id: int) -> None:
        """`task_id` has ended and its processes are gone (the supervisor's clean `ended`)."""
        self.files.release(task_id)

    def submit(self, job: Callable[..., T], *args: Any) -> Future[T]:
        """Run `job(*args)` in the cutting thread, after what was asked of it before."""
        self._cut_asked.set()
        return self._cutter.submit(job, *args)

    def close(self) -> None:
        self._cut_asked.set()
        ahead, self._ahead = self._ahead, None
        if ahead is not None and (payload := result_or_none(ahead[1])) is not None:
            payload.close()
        self._cutter.shutdown(wait=True)
        self.files.close()
        self.rows.close()


T = TypeVar("T")


def result_or_none(future: Future[T]) -> T | None:
    try:
        return future.result()
    except Exception:  # noqa: BLE001 - cut again at its turn, where its error is reported
        return None


@dataclass
class Started:
    """A task whose process has its socket and its images, waiting for its release."""

    task: AnswerTask
    ahead: bool = False
    """Started while the task before it ran."""
    sock: socket.socket | None = None
    error: TaskDataError | None = None
    """Its images could not be cut: the platform's fault, reported at the task's turn."""
    problem: Exception | None = None
    """Its images could not be sent: the task's process is gone, judged at its turn."""

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()


def hand_socket(control: socket.socket, task: AnswerTask) -> socket.socket:
    """Hand a fresh socket for `task` to the supervisor on `control`, which starts the task's
    process on it (where tasks have their own namespaces, takes the standby made while the
    previous task ran); return our end. Its images follow on it (`send_images`): the hand-over
    (supervisor, fork server, T, the task's process: four wake-ups, each a scheduling delay on
    a loaded host) runs while the images are cut instead of after.

    Raises:
        ChannelError, OSError: the control connection failed (the meta-test side is gone).
    """
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with theirs:
            send_control(control, {"type": "task", "id": task.id}, [theirs.fileno()])
    except BaseException:  # the control connection: the run's failure, not the task's
        ours.close()
        raise
    return ours


def send_images(started: Started, payloads: Payloads, deadline: float) -> Started:
    """Cut `started`'s task (or take its cut made ahead) and send it on its socket. The process
    converts nothing, then waits for its release (`go`, sent by `task_server`): nothing of the
    submission runs before. A cut that fails sets `error` (nothing sent: the task may be cut
    again on the same socket); a send that fails sets `problem`."""
    task = started.task
    try:
        payload = payloads.take(task)
    except TaskDataError as error:
        started.error = error
        return started
    started.error = None
    assert started.sock is not None
    try:
        started.sock.settimeout(max(0.01, deadline - time.monotonic()))
        send_sealed(started.sock, {"type": "task", "id": task.id, "n_ways": task.n_ways,
                                   "n_shots": task.n_shots}, payload)
    except (ChannelError, OSError) as error:
        started.problem = error
    finally:
        payload.close()  # the task's process holds its own descriptor
    return started


def start_task(control: socket.socket, task: AnswerTask, payloads: Payloads,
               deadline: float) -> Started:
    """Hand `task`'s socket to the supervisor, which starts its process, and send its images
    on it (`hand_socket`, `send_images`).

    Raises:
        ChannelError, OSError: the control connection failed (the meta-test side is gone).
    """
    return send_images(Started(task, False, hand_socket(control, task)), payloads, deadline)


def finish_ahead(started: Started, after: AnswerTask | None, payloads: Payloads,
                 deadline: float) -> Started:
    """In the cutting thread: send the next task's images on the socket already handed over
    (`hand_socket`, while the current task runs), then cut the task after it."""
    try:
        send_images(started, payloads, deadline)
    except BaseException:  # its process then sees the end of its socket
        started.close()
        raise
    if started.error is None and after is not None:
        payloads.cut_ahead(after)
    return started
