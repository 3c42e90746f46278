"""Worker pools in a real browser (issue 37): an organizer creates a pool on the web and reads
its credential once, attaches a phase, sees a worker of that credential with its host, GPUs,
images and health, and revokes the credential (the worker's next call is refused). A
participant of a pool phase with no live worker reads "no worker is serving this phase" with
their queue position. Another organizer sees nothing of the pool; an admin sees it."""

from __future__ import annotations

import re

from _browser_support import login, shots_at_both_widths, write_zip
from playwright.sync_api import expect


def _pool_call(arena, token: str):
    return arena.http.post("/internal/pool/jobs", headers={"X-Arena-Pool-Token": token},
                           json={"worker": "lab-gpu-1", "host": "gpu-host.lab",
                                 "gpus": ["0", "1"], "images": ["metadl-arena/sandbox:gpu"]})


def test_an_organizer_runs_a_pool_from_the_web(arena, page, browser, tmp_path):
    olga = arena.user("olga", role="organizer")
    ann = arena.user("ann")
    phase_id = arena.phase(olga, name="final-gpu")

    login(page, olga)
    page.get_by_role("link", name="Worker pools").click()
    page.get_by_label("New pool name").fill("lab-gpus")
    page.get_by_role("button", name="Create pool").click()
    token = page.locator("#pool-token").inner_text().strip()
    assert re.fullmatch(r"arena_pool_[A-Za-z0-9_-]{40,}", token)
    expect(page.locator("#new-token")).to_contain_text("shown only this once")
    pool_id = int(re.search(r'action="/organizer/pools/(\d+)/tokens"', page.content()).group(1))

    page.goto(f"/organizer/pools/{pool_id}")  # the credential is never shown again
    assert token not in page.content()
    expect(page.locator("#pool-credentials")).to_contain_text(token[:12])
    page.get_by_role("button", name="Attach to this pool phase final-gpu").click()
    expect(page.locator("#pool-phases")).to_contain_text("this pool")

    # A participant's run waits for the pool, which has no live worker: said with a position.
    arena.upload(phase_id, ann, write_zip(tmp_path / "s.zip"))
    participant = browser.new_context(base_url=arena.url).new_page()
    login(participant, ann)
    participant.goto(f"/phases/{phase_id}")
    expect(participant.locator("#serving")).to_contain_text("No worker is serving this phase")
    expect(participant.locator("#serving")).to_contain_text("number 1 in this phase's queue")
    shots_at_both_widths(participant, "pool-phase-no-worker")

    assert _pool_call(arena, token).status_code in (200, 204)  # a worker calls in
    page.goto(f"/organizer/pools/{pool_id}")
    workers = page.locator("#pool-workers")
    for text in ("lab-gpu-1", "gpu-host.lab", "0, 1", "metadl-arena/sandbox:gpu", "live"):
        expect(workers).to_contain_text(text)
    participant.goto(f"/phases/{phase_id}")
    expect(participant.locator("#serving")).to_have_count(0)
    shots_at_both_widths(page, "pool-page")

    page.once("dialog", lambda d: d.accept())
    page.get_by_role("button", name=f"Revoke {token[:12]}").click()
    expect(page.locator("#pool-credentials")).to_contain_text("revoked")
    assert _pool_call(arena, token).status_code == 401

    # Another organizer sees nothing of it; an admin sees it.
    otto = browser.new_context(base_url=arena.url).new_page()
    login(otto, arena.user("otto", role="organizer"))
    otto.goto("/organizer/pools")
    assert "lab-gpus" not in otto.content()
    assert otto.goto(f"/organizer/pools/{pool_id}").status == 404
    admin = browser.new_context(base_url=arena.url).new_page()
    login(admin, arena.user("root", role="admin"))
    admin.goto("/organizer/pools")
    expect(admin.get_by_role("link", name="lab-gpus")).to_be_visible()
