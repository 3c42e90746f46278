"""Test tasks no participant can reproduce (issue 12, item 2).

The test tasks are a function of public data (Meta-Album is public), the phase's protocol and one
integer, the phase's test seed. A participant — anonymous, or with a token, with a submission and
its runs — reads every API answer about the phase and the submission; none carries the phase
seed, the split seed or a dataset hash, and no integer they carry (nor any small integer) is the
test seed or plans the same tasks. Only the worker's claim carries it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from server.services.seeds import compute_test_seed
from submission_api.protocols import ProtocolParams, plan_test_episodes
from submission_api.sampling import compute_episodes_digest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "protocols"))
from protocol_fakes import build_collection  # noqa: E402

HASH = "ab" * 32
DATA = {"collection": "c", "meta_train": [{"name": "tr1", "content_hash": HASH}],
        "meta_test": [{"name": "te1", "content_hash": "cd" * 32}]}
PROTOCOL = {"name": "fixed", "tasks_per_dataset": 3, "split_seed": 424242}


def _integers(value) -> set[int]:
    """Every integer in a JSON document, and every integer-looking string."""
    if isinstance(value, bool):
        return set()
    if isinstance(value, int):
        return {value}
    if isinstance(value, str):
        return {int(value)} if value.isdigit() and len(value) < 30 else set()
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return set().union(*(_integers(v) for v in items)) if items else set()


def _participant_view(env, phase, headers) -> list:
    """Every API answer a participant (and an anonymous visitor) gets about this phase and
    their own submission and its runs."""
    submission = env.submit(phase.id, headers)
    assert submission.status_code == 201, submission.text
    sid = submission.json()["id"]
    answers = []
    for who in (headers, {}):
        for path in ("/api/v1/phases", f"/api/v1/phases/{phase.id}", "/api/v1/competitions",
                     f"/api/v1/competitions/{phase.competition_id}",
                     f"/api/v1/phases/{phase.id}/leaderboard"):
            answer = env.client.get(path, headers=who)
            assert answer.status_code == 200, (path, answer.text)
            answers.append(answer.json())
    # Every one must answer: a route that moved (a 404) would leave nothing checked here.
    for path in (f"/api/v1/submissions/{sid}", f"/api/v1/submissions/{sid}/logs",
                 f"/api/v1/submissions/{sid}/results", "/api/v1/me/submissions",
                 f"/api/v1/me/submissions?phase_id={phase.id}",
                 f"/api/v1/phases/{phase.id}/quota"):
        answer = env.client.get(path, headers=headers)
        assert answer.status_code == 200, (path, answer.status_code, answer.text)
        answers.append(answer.json())
    assert [run["run_id"] for run in answers[-5]["runs"]], answers[-5]  # its runs are there
    return answers


def test_a_participant_sees_no_seed_no_split_seed_no_dataset_hash(env):
    phase = env.phase(seed=987654321, protocol=PROTOCOL, data=DATA, runs_per_submission=3)
    _, headers = env.user("pat")
    text = json.dumps(_participant_view(env, phase, headers))
    assert "987654321" not in text and "424242" not in text
    assert "split_seed" not in text and HASH not in text and "cd" * 32 not in text


def test_its_organizers_still_see_seeds_split_seeds_and_hashes(env):
    organizer, headers = env.user("org", role="organizer")
    phase = env.phase(owner=organizer, seed=987654321, protocol=PROTOCOL, data=DATA)
    body = env.client.get(f"/api/v1/phases/{phase.id}", headers=headers).json()
    assert body["seed"] == 987654321 and body["protocol"]["split_seed"] == 424242
    assert body["data"]["meta_train"][0]["content_hash"] == HASH
    _, stranger = env.user("org-b", role="organizer")  # issue 20 D2: another competition's
    body = env.client.get(f"/api/v1/phases/{phase.id}", headers=stranger).json()
    assert body["seed"] is None and "split_seed" not in body["protocol"]
    assert body["data"]["meta_train"][0]["content_hash"] is None


def test_the_test_tasks_cannot_be_regenerated_from_what_a_participant_reads(env):
    phase = env.phase(seed=7, protocol=PROTOCOL, data=DATA, runs_per_submission=3)
    _, headers = env.user("pat")
    seen = _integers(_participant_view(env, phase, headers))
    test_seed = compute_test_seed(env.settings.seed_secret, phase.id, 7)
    assert test_seed not in seen
    params, collection = ProtocolParams.from_dict(PROTOCOL), build_collection()
    truth = compute_episodes_digest(plan_test_episodes(params, collection, test_seed))
    guesses = seen | set(range(1000)) | {7, phase.id}
    for guess in sorted(g for g in guesses if 0 <= g < 2**64):
        assert compute_episodes_digest(plan_test_episodes(params, collection, guess)) != truth


def test_the_test_seed_needs_the_secret_and_changes_with_the_phase():
    a = compute_test_seed("secret-one", 1, 0)
    assert a == compute_test_seed("secret-one", 1, 0)
    assert len({a, compute_test_seed("secret-two", 1, 0), compute_test_seed("secret-one", 2, 0),
                compute_test_seed("secret-one", 1, 1)}) == 4
    assert 0 <= a < 2**63 and np.random.SeedSequence(a)  # a valid numpy seed
