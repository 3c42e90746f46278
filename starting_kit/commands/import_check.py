"""`arena zip`, `arena run` and `arena submit` say, before anything is uploaded, which of a
submission's imports the phase's sandbox image lacks (`submission_api.imports`) and how to
ship each one.

The image is `--image`, else the one the phase file names (`--protocol-file`), else the
platform's default; an image whose package list is unknown is said so, not guessed.
`arena submit` refuses such a zip (each upload spends quota on a certain `import_error`).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import yaml

from submission_api.imports import DEFAULT_IMAGE, check_imports


def phase_image(protocol_file: Path | None) -> str | None:
    """The `image` the phase file names, or None."""
    if protocol_file is None:
        return None
    text = protocol_file.read_text(encoding="utf-8")
    try:
        data: Any = json.loads(text) if protocol_file.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError):
        return None
    image = data.get("image") if isinstance(data, dict) else None
    return image if isinstance(image, str) and image else None


def report_missing_imports(folder: Path, image: str | None, console: Any) -> int:
    """Print what the image lacks (a warning per module, with the fix); returns how many."""
    image = image or DEFAULT_IMAGE
    missing = check_imports(folder, image)
    if missing is None:
        console.print(f"[yellow]note:[/] the package list of image {image!r} is unknown here; "
                      "its organizers say what it holds — imports were not checked")
        return 0
    for item in missing:
        console.print(f"[bold yellow]warning:[/] {item.file}:{item.line} imports "
                      f"[bold]{item.module}[/], which the sandbox image {image} does not have: "
                      f"the platform run would fail with import_error. {item.advice()}",
                      highlight=False)
    return len(missing)


def count_missing_in_zip(archive: Path, image: str | None, console: Any) -> int:
    """`report_missing_imports` for the zip about to be uploaded, read from a temporary
    extraction with the platform's own checks (a zip it refuses is left to the server)."""
    from submission_api.submission_zip import UnsafeZipError, safe_extract

    with tempfile.TemporaryDirectory(prefix="arena-submit-") as tmp:
        try:
            folder = safe_extract(archive, Path(tmp))
        except UnsafeZipError:
            return 0
        return report_missing_imports(folder, image, console)
