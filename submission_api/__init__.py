"""The participant contract and the evaluation core shared by the worker, the sandbox and the
starting kit: API classes, Meta-Album data, task samplers, scoring and the runner.

Nothing here imports FastAPI, Celery, SQLAlchemy or docker: this package runs inside the sandbox
and on a participant's laptop.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from submission_api.api import Learner, MetaLearner, Predictor
    from submission_api.task import Task

__all__ = ["Learner", "MetaLearner", "Predictor", "Task"]
_HOMES = {"Learner": "api", "MetaLearner": "api", "Predictor": "api", "Task": "task"}


def __getattr__(name: str) -> Any:
    """The contract's classes, imported on first use: they import torch, which the trusted side
    (the CLI, the task server, the scorer) never needs (~1-4 s per process, issue 38)."""
    if name in _HOMES:
        return getattr(importlib.import_module(f"submission_api.{_HOMES[name]}"), name)
    raise AttributeError(f"module 'submission_api' has no attribute {name!r}")
