"""The bundle's `kit:` section on the organizer's side of `arena competition create|update`
(issue 32.4): every path checked before anything is sent, then `files` zipped and the
`sample_data` collection tarred and uploaded, for the competition page to serve."""

from __future__ import annotations

import tarfile
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starting_kit.commands.bundle_client import _line_of
from starting_kit.commands.remote_client import RemoteError

if TYPE_CHECKING:
    from starting_kit.commands.remote_client import ArenaClient


def send_kit(client: ArenaClient, bundle: Path, competition_id: int, console: Any) -> None:
    """Upload what the bundle's `kit:` names (paths relative to the bundle): `files` zipped
    (served inside the starting kit under competition/) and the `sample_data` collection as a
    tar of its contents, each after checking it is there (the competition page links both)."""
    import yaml

    try:
        raw = yaml.safe_load(bundle.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, ValueError):
        return  # the server has reported the file's problems already
    kit = raw.get("kit") if isinstance(raw, dict) else None
    if not isinstance(kit, dict):
        return
    base = bundle.parent
    with tempfile.TemporaryDirectory() as tmp:
        if kit.get("files"):
            archive = Path(tmp) / "files.zip"
            _zip_paths(base, [str(p) for p in kit["files"]], archive)
            client.upload(f"/api/v1/competitions/{competition_id}/kit/files.zip", archive, {},
                          show=False)
            console.print(f"kit files sent: {', '.join(str(p) for p in kit['files'])}")
        if kit.get("sample_data"):
            folder = (base / str(kit["sample_data"])).resolve()
            if not (folder / "info" / "meta_splits.txt").is_file():
                raise RemoteError(f"kit.sample_data {kit['sample_data']!r}: {folder} is not a "
                                  "collection (no info/meta_splits.txt); make one with `arena "
                                  f"data generate {folder}`")
            archive = Path(tmp) / "sample_data.tar"
            with tarfile.open(archive, "w") as tar:
                for item in sorted(folder.iterdir()):
                    tar.add(item, arcname=item.name, filter=_no_links)
            client.upload(f"/api/v1/competitions/{competition_id}/kit/sample_data.tar",
                          archive, {}, show=True)
            console.print(f"sample data sent: {folder} ({archive.stat().st_size} bytes)")


def check_kit_paths(bundle: Path, text: str, raw: Any) -> None:
    """Raise RemoteError, before anything is sent, for each path of `kit:` that is not there
    (file, line, the folder it was looked for in)."""
    kit = raw.get("kit") if isinstance(raw, dict) else None
    if not isinstance(kit, dict):
        return
    named = [("files", str(p)) for p in kit.get("files") or []] + (
        [("sample_data", str(kit["sample_data"]))] if kit.get("sample_data") else [])
    problems = [f"  {bundle}:{_line_of(text, rel if key == 'files' else f'{key}: {rel}')}: "
                f"kit.{key}: {rel!r} does not exist ({(bundle.parent / rel).resolve()}); "
                "paths are relative to the bundle file"
                for key, rel in named if not (bundle.parent / rel).exists()]
    if problems:
        raise RemoteError("\n".join([f"{bundle}: {len(problems)} problem(s); nothing was "
                                      "sent:", *problems]))


def _zip_paths(base: Path, paths: list[str], archive: Path) -> None:
    """Zip files and folders named relative to `base`, keeping those relative names."""
    import zipfile

    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as out:
        for rel in paths:
            path = (base / rel).resolve()
            if not path.exists():
                raise RemoteError(f"kit.files: {rel!r} does not exist ({path}); paths are "
                                  "relative to the bundle file")
            for item in [path, *sorted(path.rglob("*"))] if path.is_dir() else [path]:
                if item.is_file() and "__pycache__" not in item.parts:
                    out.write(item, item.relative_to(path.parent).as_posix())


def _no_links(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """Regular files and folders only (the server refuses links)."""
    return info if info.isfile() or info.isdir() else None
