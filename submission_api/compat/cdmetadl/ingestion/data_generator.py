"""`cdmetadl.ingestion.data_generator`: the Task class under its NeurIPS'22 module name."""

from submission_api.task import Task

__all__ = ["Task"]
