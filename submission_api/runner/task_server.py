"""The trusted side of meta-test: holds the run's test tasks and releases them one at a time.

Runs in a thread of the process that prepared the run (the worker, or `arena run`) and never
imports participant code. It listens on a unix socket in a folder the participant side can reach,
accepts exactly one connection (the supervisor's, made before any participant code runs), then
removes the socket so nothing else can connect. For each task it makes a fresh socket pair, hands
one end to the supervisor (which forks the task's process with it), sends that task's images in
a sealed memory file (`channel.seal`), releases it (`go` on its socket), reads back the
predictions, and releases the next task only after the supervisor reports the task's process
gone and its traces swept. Where tasks have their own namespaces, the next task is started as
soon as the current one is released: its process, which runs our code only until its release,
turns its images into tensors while the current task runs, and the task after it is cut
(`task_payloads`). In shared namespaces a task's process starts only at its turn.

What comes back is untrusted: predictions are bounded in size and must be plain numbers; they are
saved with `np.save` into a folder only the trusted side writes (`answers/predictions/`), and the
outcome (tasks done, or the failing task, its stage and message) goes to `answers/meta_test.json`.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from concurrent.futures import Future
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from submission_api.contract.caps import cap_error, cap_trace
from submission_api.contract.reasons import STAGE_REASONS, FailureReason
from submission_api.contract.record import SIGKILL
from submission_api.runner import isolation
from submission_api.runner.bundle import AnswerTask, TaskImages, read_task_plan
from submission_api.runner.channel import (
    ChannelError,
    MalformedMessage,
    receive_control,
    receive_message,
    send_control,
    send_message,
    unix_address,
)
from submission_api.runner.task_payloads import (
    Payloads,
    Started,
    TaskDataError,
    finish_ahead,
    hand_socket,
    result_or_none,
    send_images,
    start_task,
)

CONTROL_SOCKET = "control.sock"
REPORT_FILE = "meta_test.json"
PREDICTIONS = "predictions"
COLLECT_GRACE_S = 2.0
"""How long a task's process may take to exit after its answer was read (flushing its logs)."""


@dataclass
class MetaTestReport:
    """How meta-test ended, as the trusted side saw it."""

    tasks_done: int = 0
    n_tasks: int = 0
    failed_task: int | None = None
    reason: str | None = None
    stage: str | None = None
    message: str | None = None
    traceback: str | None = None
    isolation: str | None = None
    task_namespaces: bool | None = None
    """Whether every test task had its own namespaces (False: the shared fallback)."""
    seconds: float = 0.0
    startup_s: float = 0.0
    """Of `seconds`, until the supervisor had started (its fork server preloaded)."""

    @property
    def ok(self) -> bool:
        return self.reason is None and self.tasks_done == self.n_tasks


def read_report(answers_dir: Path) -> MetaTestReport | None:
    path = answers_dir / REPORT_FILE
    if not path.is_file():
        return None
    return MetaTestReport(**json.loads(path.read_text()))


def prediction_limit(task: AnswerTask) -> int:
    """Largest prediction payload accepted: float64 scores `[n_query, n_ways]`."""
    return 8 * task.n_query * max(task.n_ways, 1)


class TaskServer:
    """Serve a prepared run's test tasks to one supervisor; use as a context manager around the
    launch of the meta-test side (`with TaskServer(...) as server: launch(server.socket_path)`).
    """

    def __init__(self, answers_dir: Path, channel_dir: Path, deadline: float,
                 progress_path: Path | None = None) -> None:
        self.answers_dir, self.deadline = answers_dir, deadline
        self.progress_path = progress_path
        self.channel_dir = channel_dir
        self.socket_path = channel_dir / CONTROL_SOCKET
        self.report = MetaTestReport()
        self._closing = threading.Event()
        self._listener: socket.socket | None = None
        self._control: socket.socket | None = None
        self._thread = threading.Thread(target=self._serve, name="arena-task-server", daemon=True)
        self._waiting: Future[Started] | None = None
        """The next task, being started while the current one runs (closed if the run stops)."""

    def __enter__(self) -> TaskServer:
        self.channel_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.channel_dir, 0o755)
        self.socket_path.unlink(missing_ok=True)
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with unix_address(self.socket_path) as address:
            self._listener.bind(address)
        os.chmod(self.socket_path, 0o666)  # the sandbox user is not ours; the folder is private
        self._listener.listen(1)
        (self.answers_dir / PREDICTIONS).mkdir(exist_ok=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self, wait_s: float = 10.0) -> MetaTestReport:
        """Stop serving (the launch is over), wait for the thread, write the report."""
        self._closing.set()
        self._hang_up()
        self._thread.join(wait_s)
        for sock in (self._listener, self._control):
            if sock is not None:
                sock.close()
        self.socket_path.unlink(missing_ok=True)
        (self.answers_dir / REPORT_FILE).write_text(json.dumps(asdict(self.report)))
        return self.report

    def _remaining(self) -> float:
        return self.deadline - time.monotonic()

    def _serve(self) -> None:
        started = time.monotonic()
        images: TaskImages | None = None
        payloads: Payloads | None = None
        isolation.set_dumpable(False)  # no same-user process may read the tasks from our memory
        try:
            try:
                plan = read_task_plan(self.answers_dir)
                images = TaskImages(plan)
                payloads = Payloads(images)
            except Exception as error:  # noqa: BLE001 - whatever it is, it is ours
                raise TaskDataError(f"the platform could not open the run's test tasks: "
                                    f"{type(error).__name__}: {error}") from error
            self.report.n_tasks = len(plan.tasks)
            payloads.warm()  # while the supervisor starts
            if not self._accept():
                return
            self.report.startup_s = round(time.monotonic() - started, 3)
            # Ahead only where tasks have their own namespaces: there the running task cannot
            # name, signal or trace the next one's process (runner/forkserver.py).
            ahead = self.report.task_namespaces is True
            tasks, control = plan.tasks, self._control
            assert control is not None  # set by _accept
            for index, task in enumerate(tasks):
                self._progress(started)
                if self._waiting is not None:  # started while the task before it ran
                    current, self._waiting = self._waiting.result(), None
                else:
                    current = start_task(control, task, payloads, self.deadline)
                if not ahead:
                    payloads.cut_ahead(tasks[index + 1] if index + 1 < len(tasks) else None)
                if not self._serve_task(current, payloads,
                                        tasks[index + 1 : index + 3] if ahead else []):
                    break
                self.report.tasks_done += 1
            self._progress(started)
            if self._control is not None:  # set by _accept
                with contextlib.suppress(OSError):
                    send_control(self._control, {"type": "end"})
        except TaskDataError as error:
            self._fail(self.report.tasks_done, FailureReason.PLATFORM_ERROR, "meta_test",
                       str(error))
        except (ChannelError, OSError) as error:
            if not self._closing.is_set() and self.report.reason is None:
                self._fail(None, FailureReason.CRASHED, "meta_test",
                           f"the meta-test side stopped answering: {error}")
        except Exception as error:  # noqa: BLE001 - never a silent thread death (a hung run)
            if self.report.reason is None:
                self._fail(self.report.tasks_done, FailureReason.PLATFORM_ERROR, "meta_test",
                           f"the task server failed: {type(error).__name__}: {error}")
            raise
        finally:
            # However this thread ends, the supervisor learns it at once (it reads what was
            # sent, then the end of the stream) instead of waiting for the run's time limit.
            self._hang_up()
            isolation.set_dumpable(True)
            if payloads is not None:
                payloads.close()  # after the start of a next task, if one was under way
            if self._waiting is not None:  # its process sees the end of its socket and exits
                if (waiting := result_or_none(self._waiting)) is not None:
                    waiting.close()
                self._waiting = None
            if images is not None:
                images.close()
            self.report.seconds = round(time.monotonic() - started, 3)

    def _hang_up(self) -> None:
        for sock in (self._listener, self._control):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def _progress(self, started: float) -> None:
        """progress.json for `arena run`'s bars (same fields as the meta-train side writes)."""
        if self.progress_path is None:
            return
        temp = self.progress_path.with_name(f".{self.progress_path.name}.tmp")
        temp.write_text(json.dumps({"stage": "meta_test", "done": self.report.tasks_done,
                                    "total": self.report.n_tasks,
                                    "elapsed_s": round(time.monotonic() - started, 3)}))
        os.replace(temp, self.progress_path)

    def _accept(self) -> bool:
        assert self._listener is not None
        self._listener.settimeout(max(0.01, self._remaining()))
        try:
            control, _ = self._listener.accept()
        except TimeoutError as error:
            raise ChannelError("the meta-test supervisor never connected") from error
        # Exactly one connection: the supervisor's, made before any participant code runs.
        self._listener.close()
        self.socket_path.unlink(missing_ok=True)
        self._control = control
        try:
            hello, _ = receive_control(control, self.deadline)
        except ChannelError as error:  # before any task: only platform code had run
            self._fail(None, FailureReason.PLATFORM_ERROR, "meta_test",
                       f"the meta-test supervisor (platform code) ended before its first test "
                       f"task: {error}; retried, not charged")
            return False
        if hello.get("platform"):  # its fork server was lost at start-up (runner/forkserver.py)
            self._fail(None, FailureReason.PLATFORM_ERROR, "meta_test",
                       f"{str(hello['platform'])[:1000]}; retried, not charged")
            return False
        self.report.isolation = str(hello.get("isolation", ""))[:400]
        self.report.task_namespaces = hello.get("private") is True
        if hello.get("refused"):  # the private copy did not fit in the run's memory
            self._fail(None, FailureReason.OUT_OF_MEMORY, "meta_test",
                       str(hello["refused"])[:1000])
            return False
        return True

    def _serve_task(self, current: Started, payloads: Payloads,
                    following: list[AnswerTask]) -> bool:
        """Release one task and collect its predictions; False when the run must stop.

        `following`: the next task and the one after, where tasks are started ahead: once this
        task is released, the next one's socket is handed over (its process is started) and its
        images are sent from the cutting thread once cut, while this task runs; the one after
        is cut there next.

        Whatever the task's process sends ends here in an answer or a `problem`, never in an
        exception (a hostile frame must not stop this thread: the run would hang to its time
        limit). Then the supervisor is told to end the task's process (at once when the answer
        was refused, after a short grace otherwise), and its `ended` report is awaited.
        """
        assert self._control is not None
        task = current.task
        if current.error is not None and current.ahead:
            # cut again at its turn, its error then (its process has its socket already)
            current = send_images(current, payloads, self.deadline)
        if current.error is not None:
            current.close()
            raise current.error
        assert current.sock is not None
        answer: tuple[dict, list[np.ndarray]] | None = None
        problem: Exception | None = current.problem
        with current.sock as ours:
            if problem is None:
                try:
                    ours.settimeout(max(0.01, self._remaining()))
                    send_message(ours, {"type": "go"})
                except (ChannelError, OSError) as error:
                    problem = error
            if problem is None:
                if following:  # its process is started now; its images follow when cut
                    following_started = Started(following[0], True,
                                                hand_socket(self._control, following[0]))
                    self._waiting = payloads.submit(
                        finish_ahead, following_started,
                        following[1] if len(following) > 1 else None, payloads,
                        self.deadline)
                try:
                    answer = receive_message(ours, prediction_limit(task), self.deadline)
                except (ChannelError, OSError) as error:
                    problem = error
                except Exception as error:  # noqa: BLE001 - the peer is hostile: a verdict
                    problem = MalformedMessage(f"{type(error).__name__}: {str(error)[:200]}")
        accepted = answer is not None and problem is None
        send_control(self._control, {"type": "collect", "id": task.id,
                                     "grace_s": COLLECT_GRACE_S if accepted else 0.0})
        ended, _ = receive_control(self._control, self.deadline)
        if ended.get("type") != "ended" or ended.get("id") != task.id:
            raise ChannelError(f"the supervisor answered {str(ended)[:200]} for test task "
                               f"{task.id}; expected its 'ended' report")
        if ended.get("platform"):  # the fork server or the task's reaper was lost
            lost = str(ended["platform"])[:1000]
            if ended.get("reachable"):  # shared namespaces: the task could have killed it
                self._fail(task.id, FailureReason.KILLED, "meta_test",
                           f"test task {task.id}: {lost} (in shared namespaces, where the task "
                           "could have ended it itself)")
            else:
                self._fail(task.id, FailureReason.PLATFORM_ERROR, "meta_test",
                           f"test task {task.id}: {lost}; the task cannot reach it (its own "
                           "namespaces): retried, not charged")
            return False
        left = ended.get("left") or []
        if left:
            self._fail(task.id, "crashed", "meta_test",
                       f"test task {task.id} left behind what the platform could not remove: "
                       f"{'; '.join(str(item)[:300] for item in list(left)[:10])}. A task must "
                       "leave nothing that could reach a later task: remove what it creates, "
                       "and change no attribute of other processes")
            return False
        payloads.release(task.id)  # its processes are gone: its file may be written again
        return self._record(task, answer, problem, ended)

    def _record(self, task: AnswerTask, answer: tuple[dict, list[np.ndarray]] | None,
                problem: Exception | None, ended: dict) -> bool:
        if isinstance(problem, MalformedMessage):
            self._fail(task.id, FailureReason.BAD_PREDICTIONS, "predict",
                       f"test task {task.id}: the predictions could not be accepted: {problem}; "
                       f"expected labels [{task.n_query}] or scores [{task.n_query}, "
                       f"{task.n_ways}] as a numeric array")
            return False
        if answer is not None and answer[0].get("type") == "predictions" and len(answer[1]) == 1:
            np.save(self.answers_dir / PREDICTIONS / f"task_{task.id:05d}.npy", answer[1][0],
                    allow_pickle=False)
            return True
        if answer is not None and answer[0].get("type") == "error":
            stage = str(answer[0].get("stage"))
            error = cap_error(str(answer[0].get("error")))
            self._fail(task.id, STAGE_REASONS.get(stage, FailureReason.PREDICT_ERROR), stage,
                       f"{stage} raised on test task {task.id}: {error}",
                       cap_trace(str(answer[0].get("traceback") or "")))
            return False
        how = (f"was killed by signal {ended.get('signal')}" if ended.get("signal")
               else f"exited with code {ended.get('exit_code')}")
        detail = f" ({problem})" if problem else ""
        if ended.get("killed_by_supervisor"):
            how = "was ended by the platform after the trusted side stopped waiting"
            reason = FailureReason.CRASHED
        else:
            # A SIGKILL is out of memory only on evidence, which the executor holds: the verdict
            # (`submission_api.contract.verdict`) decides it.
            reason = (FailureReason.KILLED if ended.get("signal") == SIGKILL
                      else FailureReason.CRASHED)
        hint = "" if reason == FailureReason.KILLED else "; see the log for its output"
        self._fail(task.id, reason, "meta_test", f"the process of test task {task.id} {how} "
                   f"without sending valid predictions{detail}{hint}")
        return False

    def _fail(self, task_id: int | None, reason: str, stage: str | None, message: str,
              trace: str | None = None) -> None:
        self.report.failed_task, self.report.reason = task_id, reason
        self.report.stage, self.report.message, self.report.traceback = stage, message, trace
