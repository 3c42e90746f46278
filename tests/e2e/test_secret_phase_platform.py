"""Exfiltration through the real platform (issue 20, item 5): in a phase whose test data is
secret, submissions run in the Docker sandbox and try the three channels a hostile participant
found on 08e9140 — printing base85 test pixels while meta-testing, raising an exception that
carries pixels from a test task, and encoding bits in per-task scores. Whatever the owner can
read (API, pages) holds 0 bytes of test pixels, no per-task result and no score until the
organizers publish; the organizers read all of it (the worker stores everything)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from platform_support import TLS, Platform, make_model_zip

pytestmark = [pytest.mark.integration, pytest.mark.docker, pytest.mark.slow]

MARK = "EXFIL:"
B85 = """
import base64
def leak(images):
    return base64.b85encode((images[:1] * 255).to(torch.uint8).numpy().tobytes()[:600]).decode()
"""
SUBMISSIONS = {
    "prints": {"meta_fit": 'print("TRAIN-OK", flush=True)',
               "predict": f'print("{MARK}" + leak(query_set), flush=True)'},
    "raises": {"meta_fit": 'print("TRAIN-OK", flush=True)',
               "fit": f'raise ValueError("{MARK}" + leak(support_set[0]))'},
    "bits": {"meta_fit": 'print("TRAIN-OK", flush=True)',
             "predict": 'if CALLS["predict"] % 2 == 0:\n'
                        '    return torch.zeros(len(query_set), dtype=torch.long).numpy()'},
}


@pytest.fixture(scope="module")
def secret_phase(platform: Platform, tiny_collection: Path, arena_cache: Path,
                 tmp_path_factory: pytest.TempPathFactory) -> dict:
    organizer = platform.create_user("secret-org", "organizer")
    data = platform.register_collection(tiny_collection, arena_cache)
    phase_id = platform.create_phase(organizer, data, leaderboard={"test_data": "secret"},
                                     protocol={"name": "cross-domain", "tasks_per_dataset": 3})
    owner = platform.create_user("mallory")
    folder = tmp_path_factory.mktemp("exfil")
    ids = {name: platform.submit(owner, phase_id,
                                 make_model_zip(folder / name, top=B85, **hooks))
           for name, hooks in SUBMISSIONS.items()}
    # No pre-fault of the 1 GB image (7-9 s a worker process at load 35): what leaks here is
    # written output, not which pages are resident (test_task_isolation_platform.py keeps it).
    platform.start_worker("w-secret", ARENA_WORKER_PREFAULT="0")
    finals = {name: platform.wait_terminal(owner, sid, timeout_s=600) for name, sid in ids.items()}
    return {"phase_id": phase_id, "organizer": organizer, "owner": owner, "ids": ids,
            "finals": finals}


def readable(platform: Platform, token: str, phase_id: int, submission_id: int) -> str:
    """Everything `token`'s holder reads about the submission, over the API and the pages."""
    with platform.api(token) as api:
        texts = [api.get(path).text for path in (
            f"/api/v1/submissions/{submission_id}",
            f"/api/v1/submissions/{submission_id}/results",
            f"/api/v1/submissions/{submission_id}/logs", "/api/v1/me/submissions",
            f"/api/v1/phases/{phase_id}/leaderboard",
            f"/api/v1/phases/{phase_id}/leaderboard?format=csv")]
    with httpx.Client(base_url=platform.base_url, timeout=30, follow_redirects=False,
                      verify=TLS) as web:
        page = web.get("/login")
        nonce = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
        assert web.post("/login", data={"csrf_token": nonce, "token": token}).status_code == 303
        texts += [web.get(path).text for path in (
            f"/submissions/{submission_id}", f"/submissions/{submission_id}/runs/0/report", "/my",
            f"/phases/{phase_id}/leaderboard")]
    return "\n".join(texts)


def leaked_bytes(text: str) -> int:
    """Bytes of base85 pixels after each marker the text carries."""
    import base64

    total = 0
    for chunk in re.findall(re.escape(MARK) + r"([0-9A-Za-z!#$%&()*+\-;<=>?@^_`{|}~]+)", text):
        for start in range(0, len(chunk) - 4, 5):  # each 5-character group is 4 bytes
            try:
                total += len(base64.b85decode(chunk[start:start + 5]))
            except ValueError:  # cut by escaping (a page's &amp;) or by the end of a line
                break
    return total


def test_the_owner_reads_no_test_pixels_no_per_task_result_and_no_score(platform, secret_phase):
    s = secret_phase
    assert s["finals"]["prints"]["state"] == "finished", s["finals"]["prints"]
    assert s["finals"]["raises"]["state"] == "failed", s["finals"]["raises"]
    assert s["finals"]["bits"]["state"] == "finished", s["finals"]["bits"]
    for name, submission_id in s["ids"].items():
        owner = readable(platform, s["owner"], s["phase_id"], submission_id)
        assert leaked_bytes(owner) == 0 and MARK not in owner, name
        assert "TRAIN-OK" in owner, name  # meta-train output stays visible
        with platform.api(s["owner"]) as api:
            results = api.get(f"/api/v1/submissions/{submission_id}/results").json()
            status = api.get(f"/api/v1/submissions/{submission_id}").json()
        assert results["score"] is None and status["score"] is None, name
        assert all(run["tasks"] == [] and run["summary"] is None and run["score"] is None
                   for run in results["runs"]), name
        staff = readable(platform, s["organizer"], s["phase_id"], submission_id)
        if name != "bits":  # the organizers read what was written (the attack did run)
            assert leaked_bytes(staff) > 0, name
    with platform.api(s["organizer"]) as api:
        tasks = api.get(f"/api/v1/submissions/{s['ids']['bits']}/results").json()["runs"][0]
    assert len({round(t["score"], 6) for t in tasks["tasks"]}) > 1  # the bits were there


def test_publishing_reveals_scores_and_still_no_pixels(platform, secret_phase):
    s = secret_phase
    with platform.api(s["organizer"]) as api:
        assert api.post(f"/api/v1/phases/{s['phase_id']}/close").status_code == 200
        assert api.post(f"/api/v1/phases/{s['phase_id']}/publish").status_code == 200
    with platform.api(s["owner"]) as api:
        status = api.get(f"/api/v1/submissions/{s['ids']['bits']}").json()
    assert status["score"] is not None
    for name, submission_id in s["ids"].items():
        owner = readable(platform, s["owner"], s["phase_id"], submission_id)
        assert leaked_bytes(owner) == 0 and MARK not in owner, name
