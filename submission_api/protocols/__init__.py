"""Evaluation protocols (DESIGN.md, 'Evaluation protocols'): `ProtocolParams`, stored with a
phase, and the three planning functions every run uses, locally and on the platform
(docs/internals.md, 'Sampling')."""

from submission_api.protocols.fewstab import FewstabDraw, sample_fewstab_episode
from submission_api.protocols.params import PROTOCOLS, ProtocolParams, ProtocolParamsError
from submission_api.protocols.plans import (
    compute_run_test_seed,
    plan_meta_train_view,
    plan_meta_valid_view,
    plan_test_episodes,
)

__all__ = [
    "PROTOCOLS",
    "FewstabDraw",
    "ProtocolParams",
    "ProtocolParamsError",
    "compute_run_test_seed",
    "plan_meta_train_view",
    "plan_meta_valid_view",
    "plan_test_episodes",
    "sample_fewstab_episode",
]
