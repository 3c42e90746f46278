"""The trusted side's test tasks on their way to their processes: each task's sealed file, cut one
task ahead in a thread of its own (`Payloads`), and a task whose process has its socket and its
images and waits for its release (`Started`). Used by `task_server`.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from submission_api.runner.bundle import AnswerTask, TaskImages
from submission_api.runner.channel import SealedArrays


class TaskDataError(Exception):
    """The trusted side could not read or cut the run's test tasks: the platform's fault, never
    charged to the participant."""


class Payloads:
    """Each task's sealed file, cut in a thread of its own ahead of where it is needed, so
    neither the release of a task nor the reading of its answer waits for a cut; the same thread
    starts the next task (`submit`). At most two tasks' files exist here at a time: the one
    being handed over and the next one."""

    def __init__(self, images: TaskImages) -> None:
        self.images = images
        self._ahead: tuple[int, Future[SealedArrays]] | None = None
        self._cutter = ThreadPoolExecutor(1, thread_name_prefix="arena-task-cutter")

    def take(self, task: AnswerTask) -> SealedArrays:
        """`task`'s file: the one cut ahead, or cut now.

        Raises:
            TaskDataError: the platform cannot read the task's images.
        """
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            payload = result_or_none(ahead[1])
            if ahead[0] == task.id and payload is not None:
                return payload
            if payload is not None:
                payload.close()
        try:
            return self.images.cut_sealed(task)
        except Exception as error:  # noqa: BLE001 - the compiled data is ours, not theirs
            raise TaskDataError(f"the platform could not prepare the images of test task "
                                f"{task.id}: {type(error).__name__}: {error}") from error

    def cut_ahead(self, task: AnswerTask | None) -> None:
        """Start cutting `task` for later. A failure there is not the running task's: nothing
        is kept, and the task is cut again, with its error then, when its turn comes."""
        if task is None or self._ahead is not None:
            return
        self._ahead = (task.id, self._cutter.submit(self.images.cut_sealed, task))

    def submit(self, job: Callable[..., T], *args: Any) -> Future[T]:
        """Run `job(*args)` in the cutting thread, after what was asked of it before."""
        return self._cutter.submit(job, *args)

    def close(self) -> None:
        ahead, self._ahead = self._ahead, None
        if ahead is not None and (payload := result_or_none(ahead[1])) is not None:
            payload.close()
        self._cutter.shutdown(wait=True)


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
