"""The participant contract and the evaluation core shared by the worker, the sandbox and the
starting kit: API classes, Meta-Album data, task samplers, scoring and the runner.

Nothing here imports FastAPI, Celery, SQLAlchemy or docker: this package runs inside the sandbox
and on a participant's laptop.
"""

from submission_api.api import Learner, MetaLearner, Predictor
from submission_api.task import Task

__all__ = ["Learner", "MetaLearner", "Predictor", "Task"]
