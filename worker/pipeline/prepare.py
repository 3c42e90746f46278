"""Prepare step: the phase's collection, rebuilt from cached compiled entries, and the run's
bundle (what the participant side may read) and answers (what only the scorer reads).

The worker has no Meta-Album sources, only compiled entries by content hash, so the collection is
assembled from the claim's dataset list rather than from `info/meta_splits.txt`. Planning and
writing are the runner's own `prepare_run`, the very code `arena run` uses, so the platform and
the starting kit cut the same tasks for the same seeds.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from submission_api.data import Collection, CompiledDataError, open_compiled
from worker.client import ClaimedRun
from worker.pipeline.errors import CacheCorruptError

log = logging.getLogger(__name__)

REQUIRED_SPLITS = ("meta-train", "meta-test")

PrepareRun = Callable[..., Any]
"""`submission_api.runner.prepare.prepare_run(collection, protocol, (test_seed, participant_seed),
bundle_dir, answers_dir, threads)`."""
ParseProtocol = Callable[[Mapping[str, Any]], Any]
"""Turns the phase's protocol dict into a validated `ProtocolParams`."""


def build_collection(claimed: ClaimedRun, entries: Mapping[str, Path]) -> Collection:
    """Open the cached entries and group them into the phase's splits.

    Args:
        entries: dataset name -> cached entry folder, as `fetch_datasets` returns.
    Raises:
        CacheCorruptError: an entry does not open (it is removed, so the next attempt refetches).
    """
    datasets = {}
    for ref in claimed.datasets:
        try:
            datasets[ref.name] = open_compiled(entries[ref.name], name=ref.name)
        except CompiledDataError as exc:
            shutil.rmtree(entries[ref.name], ignore_errors=True)
            raise CacheCorruptError(f"cached dataset {ref.name!r} ({ref.content_hash}) does not "
                                    f"open: {exc}; removed, it will be fetched again.") from exc
    splits: dict[str, list[str]] = {name: [] for name in REQUIRED_SPLITS}
    for ref in claimed.datasets:
        for split in ref.splits:
            splits.setdefault(split, []).append(ref.name)
    return Collection(name=claimed.collection, datasets=datasets, splits=splits)


def prepare_bundle(claimed: ClaimedRun, collection: Collection, bundle_dir: Path,
                   answers_dir: Path, *, prepare_run: PrepareRun,
                   parse_protocol: ParseProtocol) -> None:
    """Write `bundle_dir` and `answers_dir` for this run.

    The participant side may use as many threads as the phase gives CPUs (at least one), so
    that local and platform runs compute alike.

    Raises:
        ValueError: the phase's protocol does not validate or does not fit its datasets (an
            organizer's configuration fault, never the participant's).
    """
    protocol = parse_protocol(claimed.protocol)
    threads = max(1, int(claimed.resources.cpus))
    # The test seed is a secret of the phase: logged nowhere, handed only to the preparation.
    log.info("run.prepare.started", extra={"run_id": claimed.run_id,
                                           "participant_seed": claimed.participant_seed})
    prepare_run(collection, protocol, (claimed.test_seed, claimed.participant_seed), bundle_dir,
                answers_dir, threads)
