"""What one run may use: the one set of defaults and bounds of a phase's resources and of its
time limit (`TIME_LIMIT_BOUND`).

The bundle (`server/bundles/schema.py`), the JSON API (`server/schemas/competition.py`), the
claim the worker receives (`worker/client.py`) and the sandbox's limits
(`worker/sandbox_config.py`) all read `RESOURCE_BOUNDS`; a phase stored before a bound existed
reads its default here. Each bound says why it is what it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True)
class Bound:
    """Default and range of one resource; `least` is exclusive when `exclusive_least`."""

    default: float
    least: float
    most: float
    integer: bool = True
    exclusive_least: bool = False

    def check(self, name: str, value: object, fix: str = "fix the phase's resources") -> None:
        """Raise ValueError unless `value` is of the bound's kind and in range; the message
        names `name` and ends with `fix`."""
        kinds: tuple[type, ...] = (int,) if self.integer else (int, float)
        number = value if isinstance(value, int | float) and not isinstance(value, bool) else None
        in_range = number is not None and isinstance(value, kinds) and number <= self.most and (
            number > self.least if self.exclusive_least else number >= self.least)
        if not in_range:
            kind = "an integer" if self.integer else "a number"
            low = f"> {_number(self.least)}" if self.exclusive_least else (
                f">= {_number(self.least)}")
            raise ValueError(f"{name}={value!r}: expected {kind} {low} and "
                             f"<= {_number(self.most)}; {fix}")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


PIDS_DEFAULT, PIDS_MIN, PIDS_MAX = 128, 16, 4096
"""Processes and threads at once: 256 let a fork bomb load a 2-core host to 150-200 (issue 13);
torch's threads and data-loader processes of a normal run fit well under 128."""
SIZE_MAX_MB = 1024 * 1024
"""1 TiB: any larger memory, /dev/shm, /tmp or output bound is a typo."""

RESOURCE_BOUNDS: dict[str, Bound] = {
    "cpus": Bound(2.0, 0, 256, integer=False, exclusive_least=True),
    "memory_mb": Bound(8192, 16, SIZE_MAX_MB),
    "gpus": Bound(0, 0, 16),
    "pids": Bound(PIDS_DEFAULT, PIDS_MIN, PIDS_MAX),
    "shm_mb": Bound(256, 1, SIZE_MAX_MB),
    "tmp_mb": Bound(512, 1, SIZE_MAX_MB),
    "output_mb": Bound(512, 1, SIZE_MAX_MB),
}
"""Every resource of a run: memory in MB (RAM and swap alike), /dev/shm, the /tmp tmpfs and the
writable output folder in MB, GPUs as a count (the worker picks the devices)."""

TIME_LIMIT_BOUND = Bound(3600, 1, 7 * 24 * 3600)
"""A run's wall-clock limit in seconds: an hour unless the phase says otherwise, a week at most
(a run's lease is renewed by heartbeats, but a longer limit is a typo, and larger values would
not fit the phase's int4 column)."""
DEFAULT_TIME_LIMIT_S = int(TIME_LIMIT_BOUND.default)


@dataclass(frozen=True)
class RunResources:
    """One phase's resources; validated on construction (`RESOURCE_BOUNDS`)."""

    cpus: float = RESOURCE_BOUNDS["cpus"].default
    memory_mb: int = int(RESOURCE_BOUNDS["memory_mb"].default)
    gpus: int = int(RESOURCE_BOUNDS["gpus"].default)
    pids: int = PIDS_DEFAULT
    shm_mb: int = int(RESOURCE_BOUNDS["shm_mb"].default)
    tmp_mb: int = int(RESOURCE_BOUNDS["tmp_mb"].default)
    output_mb: int = int(RESOURCE_BOUNDS["output_mb"].default)

    def __post_init__(self) -> None:
        for name, bound in RESOURCE_BOUNDS.items():
            bound.check(f"resources.{name}", getattr(self, name))
        object.__setattr__(self, "cpus", float(self.cpus))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None) -> RunResources:
        """The resources a stored or sent mapping names; unknown keys are ignored (a newer
        server may send more), missing ones read their default.

        Raises:
            ValueError: a value out of range or of the wrong kind.
        """
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in (data or {}).items() if k in known})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


DEFAULT_RESOURCES = RunResources()
