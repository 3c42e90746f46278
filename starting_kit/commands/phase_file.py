"""The datasets a phase's published file names per role, for `arena run --protocol-file`.

The phase as `GET /api/v1/phases/{id}` answers it (or a bundle phase) carries `data` with
`meta_train`, `meta_valid` and `meta_test` lists of `{name, content_hash}`: the platform's
planner cuts test tasks from exactly those, not from the collection's `meta_splits.txt`, so a
local run of that file must too (issue 32.5: 10 tasks locally, 5 on the platform).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

ROLE_SPLITS = {"meta_train": "meta-train", "meta_valid": "meta-valid", "meta_test": "meta-test"}
"""The platform's `data` roles -> collection splits (as worker.client.ROLE_SPLITS)."""


def read_phase_splits(path: Path) -> dict[str, list[str]] | None:
    """`{"meta-train": [...], "meta-valid": [...], "meta-test": [...]}` from the file's `data`,
    or None when it names no dataset (bare protocol parameters: the collection's split).
    "meta-test" is left out when the phase keeps its test datasets secret (the participant's
    view of a secret phase lists none): the collection's meta-test split stands in."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        document: Any = json.loads(text) if Path(path).suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError):
        return None  # read_published_protocol reports the file itself
    data = document.get("data") if isinstance(document, dict) else None
    if not isinstance(data, dict):
        return None
    splits = {split: [n for n in (_name(ref) for ref in data.get(role) or []) if n]
              for role, split in ROLE_SPLITS.items()}
    if not any(splits.values()):
        return None
    if not splits["meta-test"]:  # a secret phase does not name them: the collection's own
        del splits["meta-test"]
    return splits


def _name(ref: Any) -> str:
    """A dataset reference's name: `{name, content_hash}` (API, bundle) or a bare name."""
    return str(ref.get("name") or "") if isinstance(ref, dict) else str(ref)
