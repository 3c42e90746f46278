"""The evaluation job as the broker carries it, and the one-machine broker's folder layout.

The server enqueues by name (it never imports the worker) and the worker registers the same
name; both build the filesystem broker from the same layout, or jobs land where no worker looks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

EVALUATE_RUN = "arena.evaluate_run"
"""The job's wire name; its arguments are `(run_id, run_token)`, ids only."""


def filesystem_broker_options(broker_dir: Path) -> dict[str, Any]:
    """Transport options of kombu's `filesystem://` broker under `broker_dir` (made if missing).

    One folder serves as both `data_folder_in` and `data_folder_out`, so what the server
    writes is what the worker reads; `control` holds exchange tables, `processed` a copy of each
    message taken (an audit trail an operator may prune).
    """
    queue_dir, processed, control = (broker_dir / "queue", broker_dir / "processed",
                                     broker_dir / "control")
    for folder in (queue_dir, processed, control):
        folder.mkdir(parents=True, exist_ok=True)
    return {"data_folder_in": str(queue_dir), "data_folder_out": str(queue_dir),
            "processed_folder": str(processed), "control_folder": str(control),
            "store_processed": True}
