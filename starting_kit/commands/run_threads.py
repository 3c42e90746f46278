"""How many CPU threads `arena run` gives a submission when `--threads` is not set.

The platform pins a run to its phase's `resources.cpus`; locally, the same phase file (`arena
run --protocol-file`, the phase as /api/v1/phases/ID or a bundle shows it) gives that number,
so the local wall time matches the platform's. Without a file the default is this machine's
usable cores: one thread made the NeurIPS'22 protonet 1.1-1.3x slower than the reference kit
(which does not pin threads) on a 2-core laptop, against 0.82x with both cores.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml


def machine_cores() -> int:
    """The cores this process may run on (its affinity mask, not the machine's total)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def phase_cpus(protocol_file: Path) -> int | None:
    """`resources.cpus` of the phase in `protocol_file`, or None when it names none."""
    text = protocol_file.read_text(encoding="utf-8")
    try:
        data: Any = json.loads(text) if protocol_file.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError):
        return None  # the protocol reader reports the file's problem
    resources = data.get("resources") if isinstance(data, dict) else None
    cpus = resources.get("cpus") if isinstance(resources, dict) else None
    if isinstance(cpus, int | float) and not isinstance(cpus, bool) and cpus >= 1:
        return int(cpus)
    return None


def default_threads(protocol_file: Path | None) -> tuple[int, str]:
    """(threads, where the number comes from) for a run without `--threads`."""
    if protocol_file is not None:
        cpus = phase_cpus(protocol_file)
        if cpus is not None:
            return cpus, f"the phase's cpus in {protocol_file.name}"
    return machine_cores(), "this machine's cores"
