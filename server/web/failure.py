"""A failed run, explained on its submission page: what went wrong in words (from the stable
`reason`), the message's first paragraph, the last frames of the traceback as preformatted text
(the worker appends the traceback to the message after a blank line), and for an import of a
module the sandbox lacks, which packages it offers and how to ship one inside the zip.

Only presentation: the reason and message are the run's, as the worker stored them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from submission_api.contract.reasons import FailureReason
from submission_api.contract.states import RunState

R = FailureReason
# What a reason means and what to try, in the participant's words: one entry per stored
# `FailureReason` (a test checks none is missing).
REASONS: dict[str, tuple[str, str]] = {
    R.INVALID_SUBMISSION: ("The submission was refused before it ran.",
                           "Check the zip with `arena zip` and `arena run` on the sample data."),
    R.IMPORT_ERROR: ("model.py could not be imported.",
                     "`arena run` imports model.py the same way but in your own environment, "
                     "where a package you installed is found; `arena zip` lists the imports "
                     "the sandbox image lacks."),
    R.META_FIT_ERROR: ("MyMetaLearner.meta_fit (or saving the learner it returned) raised an "
                       "exception during meta-training.",
                       "The traceback below shows where; `arena run` reproduces it on the "
                       "sample data."),
    R.FIT_ERROR: ("MyLearner.load or MyLearner.fit raised an exception on a test task.",
                  "Each test task loads a fresh MyLearner() from what save() wrote: check that "
                  "load() restores everything fit() needs."),
    R.PREDICT_ERROR: ("Predictor.predict raised an exception on a test task.",
                      "The traceback below shows where; `arena run` reproduces it."),
    R.BAD_PREDICTIONS: ("The predictions could not be scored.",
                        "predict must return labels of shape [n] or scores of shape "
                        "[n, n_ways] for the n query images, finite numbers only."),
    R.CRASHED: ("The submission's process ended without reporting an exception (exit code or "
                "signal below).", "Look for os._exit, sys.exit or a native crash in the log."),
    R.OUT_OF_MEMORY: ("The submission was killed for using more memory than the phase allows.",
                      "Use smaller batches or models; the phase page lists the limits."),
    R.TIME_LIMIT: ("The run took longer than the phase's time limit and was stopped.",
                  "Time meta_fit locally with `arena run --time-limit`."),
    R.INTERNAL_ERROR: ("The platform met an internal error on this run, as it did on several of "
                       "your runs today; past the free allowance such runs count against your "
                       "quota.", "Tell the organizers what your submission does differently; "
                       "they see the error in the worker's log."),
    R.PLATFORM_ERROR: ("The platform failed, not your submission; it is not charged to your "
                       "quota.", "It is retried automatically; if it stays failed, tell the "
                       "organizers."),
}
STAGES = {"config": "reading config.json", "import": "importing model.py",
          "meta_fit": "meta-training (MyMetaLearner.meta_fit)",
          "save": "saving the learner (MyLearner.save)",
          "load": "loading the learner on a test task (MyLearner.load)",
          "fit": "fitting on a test task's support set (MyLearner.fit)",
          "predict": "predicting a test task's queries (Predictor.predict)"}
SANDBOX_PACKAGES = ("numpy", "torch", "pillow (PIL)", "the Python standard library")
"""What the standard sandbox images install (scripts/build_sandbox_image.sh); the `torchvision`
image adds torchvision. A phase may name another image: its organizers say what it holds."""
FRAMES_SHOWN = 4
MISSING_MODULE = re.compile(r"No module named '([\w.]+)'")
STAGE_PREFIX = re.compile(r"^(\w+) raised( on test task \d+)?: ")


@dataclass(frozen=True)
class FailureView:
    """What the submission page shows for one failed (or timed-out) run or submission."""

    meaning: str
    advice: str
    headline: str
    stage: str | None
    last_frames: str | None
    full_trace: str | None
    missing_module: str | None

    @property
    def trace_cut(self) -> bool:
        return self.full_trace is not None and self.full_trace != self.last_frames


def explain_failure(reason: str | None, message: str | None) -> FailureView | None:
    """The explanation of `reason`/`message`, or None when there is nothing to explain."""
    if not reason and not message:
        return None
    text = (message or "").strip()
    start = text.find("Traceback (most recent call last):")
    headline, trace = (text[:start].strip(), text[start:].strip()) if start >= 0 else (text, "")
    # A timed-out submission without a run's reason is explained by its state.
    key = FailureReason.TIME_LIMIT if reason == RunState.TIMED_OUT else reason or ""
    meaning, advice = REASONS.get(key, ("The run failed.", ""))
    stage_match = STAGE_PREFIX.match(headline)
    stage = None
    if stage_match:
        stage = STAGES.get(stage_match.group(1), stage_match.group(1)) + (
            stage_match.group(2) or "")
    missing = MISSING_MODULE.search(text) if reason == FailureReason.IMPORT_ERROR else None
    return FailureView(meaning=meaning, advice=advice, headline=headline, stage=stage,
                       last_frames=last_frames(trace) if trace else None,
                       full_trace=trace or None,
                       missing_module=missing.group(1).split(".")[0] if missing else None)


def last_frames(trace: str, frames: int = FRAMES_SHOWN) -> str:
    """The traceback's header, its last `frames` frames and the exception, with a marker for
    the frames left out (`  ... 7 earlier frames ...`)."""
    lines = trace.splitlines()
    starts = [i for i, line in enumerate(lines) if line.lstrip().startswith('File "')]
    if len(starts) <= frames:
        return trace
    kept_from = starts[-frames]
    skipped = len(starts) - frames
    return "\n".join([lines[0], f"  ... {skipped} earlier frame{'s' if skipped != 1 else ''} "
                      "...", *lines[kept_from:]])
