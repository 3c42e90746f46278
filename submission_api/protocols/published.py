"""A phase's protocol as its organizer publishes it, for `arena run` to evaluate exactly as the
phase does (local parity): the tasks' shape and count, the ranking metric, the aggregation over
runs and the number of runs.

Accepted files (JSON or YAML): the phase as `GET /api/v1/phases/{id}` answers it, a phase of a
competition bundle (both have `protocol` and `runs_per_submission`), or the bare protocol
parameters (`ProtocolParams.to_dict()`). The platform never publishes `split_seed` or the seeds
of its test tasks; locally the `--phase-seed` stands for both.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from submission_api.protocols.params import ProtocolParams, ProtocolParamsError


def read_published_protocol(path: Path) -> tuple[dict[str, Any], int | None]:
    """(protocol parameters, runs per submission or None) from a published file.

    Raises:
        ProtocolParamsError: unreadable, or not a mapping.
    """
    text = Path(path).read_text(encoding="utf-8")
    try:
        data = json.loads(text) if Path(path).suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as error:
        raise ProtocolParamsError(
            f"{path} is not JSON or YAML ({error}); expected the phase as the platform's "
            "/api/v1/phases/{id} shows it, or its protocol parameters."
        ) from error
    if not isinstance(data, Mapping):
        raise ProtocolParamsError(
            f"{path} holds a {type(data).__name__}, expected a mapping (a phase or its protocol)."
        )
    if isinstance(data.get("protocol"), Mapping):
        runs = data.get("runs_per_submission")
        return dict(data["protocol"]), int(runs) if isinstance(runs, int) else None
    return dict(data), None


def compute_local_protocol(published: Mapping[str, Any], overrides: Mapping[str, Any],
                           phase_seed: int) -> ProtocolParams:
    """The published parameters with the command line's non-None `overrides` on top;
    `split_seed` is the local phase seed unless the file gives one (staff files do)."""
    values = {"split_seed": phase_seed, **published}
    values.update({k: v for k, v in overrides.items() if v is not None})
    return ProtocolParams.from_dict(values)
