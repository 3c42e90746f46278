"""A worker host says at start-up whether its runs' test tasks get their own namespaces (issue
34.4): the probe finds them under the meta-test profile, and a host that refuses them (Docker's
default profile stands in for AppArmor or a kernel without user namespaces) logs a WARNING."""

from __future__ import annotations

import logging
import os

import pytest

from worker.isolation_probe import check_host_isolation

pytestmark = [pytest.mark.integration, pytest.mark.docker]
IMAGE = os.environ.get("ARENA_SANDBOX_IMAGE", "metadl-arena/sandbox:cpu")


def test_a_host_that_falls_back_says_so_at_start_up(docker_client, caplog):
    with caplog.at_level(logging.INFO, logger="worker.isolation_probe"):
        assert check_host_isolation(docker_client, IMAGE) is True
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert check_host_isolation(docker_client, IMAGE, profile=False) is False
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "falls back to shared namespaces" in warnings[0], warnings
