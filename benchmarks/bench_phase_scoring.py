"""The phase's scoring per board entry: parsed once per page (issue 35.1) vs looked up per call.

    .venv/bin/python benchmarks/bench_phase_scoring.py [--entries 10000] [--rounds 7]

Before, every `aggregate_runs`, `compute_phase_sides` and `lower_is_better` call serialized the
phase's stored protocol to JSON to find its parse in an LRU cache (two calls per entry of an
average-rank board). Now the page parses it once (`scores.phase_scoring`) and passes the
`PhaseScoring` down. Both variants aggregate the same runs (one run of 10 datasets per entry) in
interleaved rounds; the figure is the ratio of their medians, on one machine state.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from server.services.scores import aggregate_runs, compute_phase_scoring, compute_phase_sides  # noqa: E402
from submission_api.protocols import ProtocolParams  # noqa: E402

PROTOCOL = ProtocolParams(name="cross-domain").to_dict()


@lru_cache(maxsize=256)
def _before_parse(key: str):  # the HEAD version's cache, keyed by the protocol's JSON
    return compute_phase_scoring(json.loads(key))


def _before(protocol):
    return _before_parse(json.dumps(dict(protocol or {}), sort_keys=True, default=str))


def board(entries: int) -> list[list[SimpleNamespace]]:
    summary = {"metric_cells": {"score": {f"d{i}": 0.5 + i / 100 for i in range(10)}}}
    return [[SimpleNamespace(score=0.5, summary=summary)] for _ in range(entries)]


def run(rows: list[list[SimpleNamespace]], once: bool) -> float:
    started = time.perf_counter()
    scoring = compute_phase_scoring(PROTOCOL) if once else None
    for runs in rows:
        given = scoring if once else _before(PROTOCOL)
        aggregate_runs(runs, given)
        compute_phase_sides(runs, scoring if once else _before(PROTOCOL))
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    rows = board(args.entries)
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(args.rounds):
        for once in (False, True):
            times[once].append(run(rows, once))
    before, now = statistics.median(times[False]), statistics.median(times[True])
    print(f"{args.entries} entries: per call {before * 1000:.1f} ms, parsed once "
          f"{now * 1000:.1f} ms, ratio {before / now:.2f}")


if __name__ == "__main__":
    main()
