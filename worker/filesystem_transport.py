"""kombu's `filesystem://` transport with a consumer that never takes a half-written message.

kombu's producer creates a message's file and only then locks it and writes it; its consumer
moves any file it lists, lock or not (a `flock` does not stop a rename). A consumer polling while
the server enqueues can therefore take a file still empty, and the worker dies on it
("Unrecoverable error: JSONDecodeError", kombu#1551). The consumer here first takes the file's
lock without blocking: a file still locked is being written, and a file that is empty is one the
producer has created but not yet locked; both are left for the next poll. Holding the lock, it
moves the file and reads it, so the whole message is read, once.

The server keeps kombu's own producer (it must not import the worker); the worker names this
transport as its `broker_transport` (`worker.celery_app.build_celery_config`).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from queue import Empty
from typing import Any

from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import loads

TRANSPORT = "worker.filesystem_transport:Transport"
"""The name Celery's `broker_transport` setting takes for this transport."""


class Channel(filesystem.Channel):
    """A filesystem channel whose `_get` takes only messages their producer has finished."""

    def _get(self, queue: Any, timeout: Any = None) -> Any:
        suffix = f"{queue}.msg"
        processed = self.store_processed and self.processed_folder or tempfile.gettempdir()
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.partition(".")[2] != suffix:
                continue
            payload = self._take(os.path.join(self.data_folder_in, name),
                                 os.path.join(processed, name))
            if payload is not None:
                return loads(bytes_to_str(payload))
        raise Empty()

    def _take(self, path: str, destination: str) -> bytes | None:
        """The message at `path`, moved to `destination`; None while it is being written or
        when another consumer took it first."""
        try:
            handle = open(path, "rb")  # noqa: SIM115 - closed below, after the lock is released
        except OSError:
            return None  # taken by another consumer meanwhile
        try:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return None  # the producer holds it: still being written
            if os.fstat(handle.fileno()).st_size == 0:
                return None  # created, not yet locked by its producer
            try:
                shutil.move(path, destination)
            except OSError:
                return None  # another consumer moved it first
            payload = handle.read()
            if not self.store_processed:
                os.remove(destination)
            return payload
        finally:
            handle.close()  # releases the lock


class Transport(filesystem.Transport):
    """kombu's filesystem transport with the consumer above."""

    Channel = Channel
