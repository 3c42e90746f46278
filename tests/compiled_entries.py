"""Tiny real compiled dataset entries (manifest, pixels, labels) as tars, for tests that
register datasets through the API: the server recomputes an entry's content hash, so a
hand-written manifest no longer passes."""

from __future__ import annotations

import io
import tarfile
import tempfile
from pathlib import Path

import numpy as np

from submission_api.data.compiled import EntryMeta, create_image_file, finalize_entry


def compiled_entry_tar(seed: int = 0, *, tamper: bool = False,
                       name: str = "D1") -> tuple[str, bytes]:
    """(content_hash, tar bytes) of a 4-image, 2-class entry drawn from `seed`.

    `tamper` flips one pixel after the manifest was written: the manifest's hash then lies.
    """
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "entry"
        root.mkdir()
        images = create_image_file(root, 4)
        images[:] = np.random.default_rng(seed).integers(0, 256, images.shape, dtype=np.uint8)
        images.flush()
        del images
        meta = EntryMeta(name=name, labels=np.array([0, 0, 1, 1]), class_names=("a", "b"))
        content_hash = finalize_entry(root, meta)
        if tamper:
            with open(root / "images.u8", "r+b") as handle:
                first = handle.read(1)
                handle.seek(0)
                handle.write(bytes([first[0] ^ 0xFF]))
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(root, arcname=content_hash)
        return content_hash, buf.getvalue()
