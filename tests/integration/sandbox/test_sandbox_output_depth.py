"""A 1,500-level tree in meta-train's /output (issue 34.6) is charged to the participant, as
before, but reported as the depth bound it passed, not as an output size it never used."""

from __future__ import annotations

import pytest

from submission_api.contract.record import ResultRecord
from submission_api.contract.verdict import decide_verdict
from worker.output_walk import remove_tree
from worker.sandbox_output import pick_mechanism

pytestmark = [pytest.mark.integration, pytest.mark.docker]

DEEP = """
import os
fd = os.open("/output", os.O_RDONLY | os.O_DIRECTORY)
for _ in range(1500):
    os.mkdir("d", dir_fd=fd)
    inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
    os.close(fd)
    fd = inner
"""


@pytest.fixture(autouse=True)
def _remove_deep_trees(tmp_path):
    """pytest's clean-up of old temp folders recurses (shutil.rmtree) and a 1,500-level tree
    left here crashed a later session's end (RecursionError, exit 1): leave no deep tree."""
    yield
    remove_tree(tmp_path)


@pytest.mark.parametrize("mechanism", ["watchdog", "loop"])
def test_a_deep_output_tree_is_reported_as_the_depth_bound(run_script, mechanism):
    if mechanism == "loop" and pick_mechanism() != "loop":
        pytest.skip("the loop-mounted output needs root and loop devices (/dev/loop-control, "
                    "mkfs.ext4); this host has none (the watchdog case still runs)")
    result = run_script(DEEP, mechanism=mechanism)
    assert result.output_exceeded
    assert result.output_detail is not None and "deeper than 64 levels" in result.output_detail
    verdict = decide_verdict(ResultRecord(exit_code=0, output_exceeded=True,
                                          output_detail=result.output_detail))
    assert verdict.reason == "bad_predictions"
    assert "deeper than 64 levels" in verdict.message and "size" not in verdict.message
