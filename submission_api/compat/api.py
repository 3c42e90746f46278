"""`api`: what a NeurIPS'22 `model.py` imports (`from api import MetaLearner, Learner,
Predictor`) when its zip does not ship its own copy of api.py."""

from submission_api.api import Learner, MetaLearner, Predictor

__all__ = ["Learner", "MetaLearner", "Predictor"]
