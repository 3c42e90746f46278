"""A submission's `config.json`, read exactly as the NeurIPS'22 Cross-Domain MetaDL starting kit
reads it, so that a zip written for that kit behaves the same here.

Keys (all optional): `train_data_format` ('task' | 'batch'), `batch_size`, `validation_datasets`
(how many meta-train datasets feed the meta-valid generator; null or 0: no meta-valid generator),
`train_config` / `valid_config` (`N, min_N, max_N, k, min_k, max_k, query_images_per_class`;
`None` ways or shots mean 'any in min..max'). As in the kit, a given `train_config` updates the
defaults key by key. Unknown keys are warned about, bad values raise `ConfigError`. Accepted and
refused as the kit's `CompetitionDataLoader` checks them: N >= 2, min_N >= 1, min_N <= max_N,
k >= 1, min_k >= 1, min_k <= max_k, query_images_per_class <= 20 (`MAX_QUERIES`).
Plain dataclasses (no pydantic): this module runs in the minimal sandbox image.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from submission_api.sampling.any_shot import TaskShape

TRAIN_DATA_FORMATS = ("task", "batch")
DEFAULT_BATCH_SIZE = 16
"""The kit's default batch size in batch mode."""

DEFAULT_TRAIN_CONFIG: dict[str, Any] = {
    "N": 5, "min_N": None, "max_N": None,
    "k": None, "min_k": 1, "max_k": 20, "query_images_per_class": 20,
}
"""The kit's meta-train tasks: 5-way, k ~ U{1..20}, 20 queries per class."""
DEFAULT_VALID_CONFIG: dict[str, Any] = {
    "N": None, "min_N": 2, "max_N": 20,
    "k": None, "min_k": 1, "max_k": 20, "query_images_per_class": 20,
}
"""The kit's meta-valid tasks mirror its meta-test tasks: N ~ U{2..20}, k ~ U{1..20}, 20 queries."""

MAX_QUERIES = 20
"""The kit refuses `query_images_per_class > 20` ("query_size cannot be greater than 20"): its
datasets have 40 images per class, and the test tasks ask 20."""

TOP_LEVEL_KEYS = ("train_data_format", "batch_size", "validation_datasets", "train_config",
                  "valid_config")


class ConfigError(ValueError):
    """A submission's config.json holds a value the kit would not accept (participant error)."""


@dataclass(frozen=True)
class GeneratorConfig:
    """One generator's task shape, with the kit's key names."""

    N: int | None = 5  # noqa: N815 - the kit's key names are the contract
    min_N: int | None = None  # noqa: N815
    max_N: int | None = None  # noqa: N815
    k: int | None = None
    min_k: int | None = 1
    max_k: int | None = 20
    query_images_per_class: int = 20

    def to_task_shape(self) -> TaskShape:
        """The sampler's TaskShape (unused bounds filled with the kit's 2..20 / 1..20)."""
        min_ways, max_ways = _bounds("N", self.N, self.min_N, self.max_N)
        min_shots, max_shots = _bounds("k", self.k, self.min_k, self.max_k)
        return TaskShape(
            n_ways=self.N, min_ways=min_ways, max_ways=max_ways,
            n_shots=self.k, min_shots=min_shots, max_shots=max_shots,
            n_queries=self.query_images_per_class,
        )


def _bounds(name: str, fixed: int | None, low: int | None, high: int | None) -> tuple[int, int]:
    """(least, most) of a task size: the fixed value twice, else the range (`_check_range` has
    refused a null size without both bounds)."""
    if fixed is not None:
        return fixed, fixed
    if low is None or high is None:
        raise ConfigError(f"config: {name} is null with min={low!r}, max={high!r}.")
    return low, high


@dataclass(frozen=True)
class SubmissionConfig:
    """The parsed config.json. `validation_datasets` None or 0 means no meta-valid generator."""

    train_data_format: str = "task"
    batch_size: int = DEFAULT_BATCH_SIZE
    validation_datasets: int | None = None
    train_config: GeneratorConfig = field(default_factory=GeneratorConfig)
    valid_config: GeneratorConfig = field(
        default_factory=lambda: GeneratorConfig(**DEFAULT_VALID_CONFIG)
    )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _check_int(where: str, value: Any, least: int, allow_none: bool) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        expected = f"an integer >= {least}" + (" or null" if allow_none else "")
        raise ConfigError(
            f"config.json {where} is {value!r}, expected {expected}; fix it in your config.json."
        )


def parse_generator_config(where: str, user: Any, defaults: Mapping[str, Any]) -> GeneratorConfig:
    """Update `defaults` with the user's dict, as the kit does, and validate the result."""
    if user is None:
        user = {}
    if not isinstance(user, Mapping):
        raise ConfigError(
            f"config.json {where} is {type(user).__name__}, expected an object with keys "
            f"{sorted(defaults)}."
        )
    for key in sorted(set(user) - set(defaults)):
        warnings.warn(f"config.json {where}.{key} is not a known key (known: {sorted(defaults)})"
                      "; it is ignored.", UserWarning, stacklevel=3)
    merged = {**defaults, **{k: v for k, v in user.items() if k in defaults}}
    for key, least in (("N", 2), ("min_N", 1), ("max_N", 1), ("k", 1), ("min_k", 1),
                       ("max_k", 1), ("query_images_per_class", 1)):
        _check_int(f"{where}.{key}", merged[key], least, key != "query_images_per_class")
    if merged["query_images_per_class"] > MAX_QUERIES:
        raise ConfigError(
            f"config.json {where}.query_images_per_class is {merged['query_images_per_class']}, "
            f"expected at most {MAX_QUERIES} (as the NeurIPS'22 kit); fix it in your config.json."
        )
    for name, low, high in (("N", "min_N", "max_N"), ("k", "min_k", "max_k")):
        _check_range(where, name, merged, low, high, user)
    return GeneratorConfig(**merged)


def _check_range(where: str, name: str, merged: dict, low: str, high: str, user: Any) -> None:
    if merged[name] is None:
        if merged[low] is None or merged[high] is None or merged[low] > merged[high]:
            raise ConfigError(
                f"config.json {where}: {name} is null with {low}={merged[low]!r}, "
                f"{high}={merged[high]!r}; expected integers {low} <= {high} (or set {name})."
            )
    elif user.get(low) is not None or user.get(high) is not None:
        # A NeurIPS'22 config.json writes "min_N": null, "max_N": null beside "N": 5: nothing to
        # warn about; only a range actually given is overridden by the fixed value.
        warnings.warn(f"config.json {where}: {name}={merged[name]} takes precedence over "
                      f"{low}/{high}; set {name} to null for a range.", UserWarning, stacklevel=4)


def parse_submission_config(data: Mapping[str, Any] | None) -> SubmissionConfig:
    """Validate a loaded config.json object; missing keys take the kit's defaults."""
    data = {} if data is None else data
    if not isinstance(data, Mapping):
        raise ConfigError(f"config.json holds {type(data).__name__}, expected a JSON object.")
    for key in sorted(set(data) - set(TOP_LEVEL_KEYS)):
        warnings.warn(f"config.json key {key!r} is not known (known: {list(TOP_LEVEL_KEYS)}); "
                      "it is ignored.", UserWarning, stacklevel=2)
    fmt = data.get("train_data_format", "task")
    if fmt not in TRAIN_DATA_FORMATS:
        raise ConfigError(
            f"config.json train_data_format is {fmt!r}, expected one of {TRAIN_DATA_FORMATS}."
        )
    batch_size = data.get("batch_size", DEFAULT_BATCH_SIZE)
    _check_int("batch_size", batch_size, 1, allow_none=False)
    validation = data.get("validation_datasets")
    _check_int("validation_datasets", validation, 0, allow_none=True)
    return SubmissionConfig(
        train_data_format=fmt,
        batch_size=batch_size,
        validation_datasets=validation,
        train_config=parse_generator_config("train_config", data.get("train_config"),
                                            DEFAULT_TRAIN_CONFIG),
        valid_config=parse_generator_config("valid_config", data.get("valid_config"),
                                            DEFAULT_VALID_CONFIG),
    )


def load_submission_config(submission_dir: Path) -> SubmissionConfig:
    """Read `<submission_dir>/config.json`; the kit's defaults when there is none."""
    path = Path(submission_dir) / "config.json"
    if not path.is_file():
        return SubmissionConfig()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"config.json is not valid JSON ({exc}); expected a JSON object."
        ) from exc
    return parse_submission_config(data)
