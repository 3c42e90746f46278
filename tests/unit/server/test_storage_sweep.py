"""Partial uploads left by a killed server are swept; fresh ones (maybe in flight) are kept."""

from __future__ import annotations

import os
import time

from server.services.storage import Storage


def test_only_old_partial_uploads_are_removed(tmp_path):
    storage = Storage(tmp_path)
    old, fresh = storage.tmp_path(), storage.tmp_path()
    old.write_bytes(b"half an upload")
    fresh.write_bytes(b"being streamed")
    day_ago = time.time() - 86400
    os.utime(old, (day_ago, day_ago))

    assert storage.sweep_stale_tmp() == 1
    assert not old.exists() and fresh.exists()
