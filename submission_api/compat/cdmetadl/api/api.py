"""`cdmetadl.api.api`: the participant contract under its NeurIPS'22 module name."""

from submission_api.api import Learner, MetaLearner, Predictor

__all__ = ["Learner", "MetaLearner", "Predictor"]
