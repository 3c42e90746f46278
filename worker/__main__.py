"""`python -m worker`: the same as `arena worker`."""

from worker.cli import worker_command

worker_command()
