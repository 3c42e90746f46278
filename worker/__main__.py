"""`python -m worker`: the same as `arena worker` (its options, e.g. --pool-token, included)."""

import typer

from worker.cli import worker_command

typer.run(worker_command)
