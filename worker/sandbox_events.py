"""What the Docker engine says about one sandbox container while it runs: kills and OOM.

The exit status alone cannot say why a container died of SIGKILL: the kernel's OOM killer, the
participant's own `kill -9`, and a `docker kill` from outside all end in 137. The engine's event
stream can. A `kill` event means someone called the engine's kill API: when the driver did not,
an operator or a host tool did, which is a platform fault (retried, never charged; issue 13 had
it charged as out of memory). An `oom` event means the container's memory cgroup hit its bound,
beside `State.OOMKilled`. A SIGKILL with neither is the participant's own doing.

The subscription is opened before the container starts, so no event can be missed, and is
filtered on the one container's id.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Any

log = logging.getLogger(__name__)
SETTLE_S = 5.0
"""How long to wait, after the exit, for the engine's `die` event (and what precedes it)."""


class EngineWatch:
    """Kill and OOM events of one container, read by a daemon thread until `close()`."""

    def __init__(self, client: Any, container_id: str) -> None:
        self.kill_signals: list[str] = []
        self.oom = False
        self.died = threading.Event()
        self._stream = client.api.events(
            decode=True, filters={"type": "container", "container": container_id,
                                  "event": ["kill", "oom", "die"]})
        threading.Thread(target=self._read, name="arena-sandbox-events", daemon=True).start()

    def _read(self) -> None:
        try:
            for event in self._stream:
                self._note(event)
        except Exception:  # noqa: BLE001 - closed by us, or the engine went away
            pass
        finally:
            self.died.set()  # nothing more will come: never make `settle` wait for nothing

    def _note(self, event: dict[str, Any]) -> None:
        action = event.get("Action") or event.get("status") or ""
        if action == "kill":
            attributes = (event.get("Actor") or {}).get("Attributes") or {}
            self.kill_signals.append(str(attributes.get("signal", "")))
        elif action == "oom":
            self.oom = True
        elif action == "die":
            self.died.set()

    def settle(self, timeout_s: float = SETTLE_S) -> None:
        """Wait (bounded) until the engine has reported the exit, so that every kill or OOM
        event before it has been read."""
        if not self.died.wait(timeout_s):
            log.warning("run.sandbox.events_late", extra={"waited_s": timeout_s})

    def close(self) -> None:
        with contextlib.suppress(Exception):  # already closed or broken: nothing to release
            self._stream.close()
