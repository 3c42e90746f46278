"""`arena run` threads default (issue 24, trap 11): the phase's cpus when a phase file is given,
else this machine's usable cores — not 1, which made the NeurIPS'22 protonet slower than the
reference kit on a 2-core machine."""

from __future__ import annotations

import json
import os

from starting_kit.commands.run_threads import default_threads, machine_cores


def test_a_phase_file_gives_its_cpus(tmp_path):
    phase = tmp_path / "phase.json"
    phase.write_text(json.dumps({"protocol": {"name": "cross-domain"},
                                 "resources": {"cpus": 3, "memory_mb": 4096}}))
    assert default_threads(phase) == (3, "the phase's cpus in phase.json")
    bundle_phase = tmp_path / "phase.yaml"
    bundle_phase.write_text("protocol: {name: fixed}\nresources: {cpus: 2.0}\n")
    assert default_threads(bundle_phase)[0] == 2


def test_without_cpus_the_machine_cores_are_used(tmp_path):
    protocol = tmp_path / "protocol.json"
    protocol.write_text(json.dumps({"name": "cross-domain"}))
    assert default_threads(protocol) == (machine_cores(), "this machine's cores")
    assert default_threads(None)[0] == len(os.sched_getaffinity(0)) >= 1
