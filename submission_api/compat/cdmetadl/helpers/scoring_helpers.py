"""`cdmetadl.helpers.scoring_helpers`: the per-iteration scores the old logger computed."""

from submission_api.logger import compute_iteration_scores


def compute_all_scores(ground_truth, predictions, n_ways, batch=False):  # noqa: ANN001, ANN201
    """NeurIPS'22 signature: scores of one iteration (no normalized accuracy for batches)."""
    return compute_iteration_scores(ground_truth, predictions, None if batch else n_ways)
