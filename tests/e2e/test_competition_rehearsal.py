"""A competition dress rehearsal (issue 32): one competition run as people run one, through
`arena serve` on a socket, a Celery worker on Redis, the Docker sandbox and Postgres.

The organizer creates it from a bundle (tabs, pages, terms, teams, a secret final with a fact
sheet); nine people sign up on the web; three teams form by invite (one newcomer follows the
invite before joining the competition); submissions go by `arena submit` and by the web form,
a 41 MB zip each way, while the organizer's 108 MB dataset uploads and two CPU burners load the
host; the organizer brings a worker pool for the final, as docs/worker-pools.md says (`arena
pool create`, `arena pool attach`, `arena worker --pool-token` with no broker URL); the feedback
phase closes into the final, whose runs wait for the pool while participants read "no worker is
serving this phase"; a carried entry is disqualified; publishing waits for the runs, which the
pool's worker evaluates (a shared worker beside it takes none); the final board has one entry
per team; fact sheets are exported; the organizer revokes the pool credential and its worker
exits 3; at each
step each role (participant, team-mate, other participant, organizer, anonymous) sees what it
should; a browser screenshots key pages at 1400 and 400 px.

The steps run in file order and share one platform; a step whose actions could not complete
makes the later steps that need it fail (never skip). A step waiting for a fix made elsewhere
is a strict xfail naming it.
"""

from __future__ import annotations

import io
import json
import re
import signal
import subprocess
import tarfile
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from platform_support import (
    TERMINAL,
    started_platform,
)
from rehearsal_pools import (
    POOL_NAME,
    POOL_WORKER,
    WORKER_ENV,
    HeldRuns,
    pool_token_of,
    start_pool_worker,
    stop_pool_worker,
)
from rehearsal_support import (
    BIG_DATASET,
    WEIGHTS_BYTES,
    RehearsalPlatform,
    Visitor,
    arena,
    chromium,
    cpu_burners,
    forms_of,
    model_folder,
    ok,
    on_screen_at_400,
    screenshots,
    text_of,
    write_big_dataset,
    write_bundle,
)

from starting_kit.sample_data import generate_collection

pytestmark = [pytest.mark.integration, pytest.mark.docker, pytest.mark.slow]

TEAMS = {"Few-shot Foxes": ["ana", "ben", "cam"], "Meta Owls": ["dia", "eli", "fay"],
         "Proto Pandas": ["gus", "hal"]}
LATE, SOLO = "hal", "ivy"  # hal follows the invite before joining; ivy stays alone
PEOPLE = [m for members in TEAMS.values() for m in members] + [SOLO]
TEAM_OF = {m: team for team, members in TEAMS.items() for m in members}
METHODS = {"ana": "Foxes: centroids + 41 MB weights", "ben": "Foxes: plain centroids",
           "dia": "Owls: centroids via the web", "gus": "Pandas: centroids", "ivy": "Ivy solo"}


@dataclass
class Rehearsal:
    platform: RehearsalPlatform
    root: Path
    organizer_token: str
    organizer: Visitor
    anonymous: Visitor
    people: dict[str, Visitor] = field(default_factory=dict)
    homes: dict[str, Path] = field(default_factory=dict)  # each person's `arena` home
    ids: dict[str, int] = field(default_factory=dict)  # competition, feedback, final
    subs: dict[str, int] = field(default_factory=dict)  # person -> feedback submission id
    carried: list[int] = field(default_factory=list)  # the final's submissions
    pool: dict[str, int] = field(default_factory=dict)  # id, credential
    pool_token: str = ""
    pool_worker: subprocess.Popen | None = None
    done: set[str] = field(default_factory=set)

    def needs(self, *steps: str) -> None:
        missing = [s for s in steps if s not in self.done]
        if missing:
            pytest.fail(f"an earlier step of the rehearsal did not complete: {missing}")

    def api_as(self, name: str | None):  # noqa: ANN201 - an httpx.Client
        token = self.organizer_token if name is None else self.cli_token(name)
        return self.platform.api(token)

    def cli_token(self, name: str) -> str:
        """The person's API token, taken from the competition page's `arena login` line."""
        saved = self.homes[name] / ".config" / "metadl-arena" / "credentials.json"
        if not saved.exists():
            answer = self.people[name].submit_form(
                f"/competitions/{self.ids['competition']}",
                f"/competitions/{self.ids['competition']}/cli-token")
            assert answer.status_code == 201, answer.text[-2000:]
            line = re.search(r"arena login --server (\S+) --token (\S+)", text_of(answer.text))
            assert line and line.group(1) == self.platform.base_url, text_of(answer.text)
            ok(arena(self.homes[name], "login", "--server", line.group(1), "--token",
                     line.group(2)))
        return json.loads(saved.read_text())["token"]


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RehearsalPlatform]:
    with started_platform(RehearsalPlatform, tmp_path_factory.mktemp("rehearsal"),
                          migrated=False) as platform:  # migrated by its server, as new
        yield platform


@pytest.fixture(scope="module")
def rh(platform: RehearsalPlatform) -> Iterator[Rehearsal]:
    token = platform.create_user("olga", "organizer")
    organizer, anonymous = Visitor(platform.base_url, "olga"), Visitor(platform.base_url)
    assert organizer.log_in(token).status_code == 303
    rehearsal = Rehearsal(platform, platform.root, token, organizer, anonymous)
    rehearsal.homes["olga"] = platform.root / "home-olga"
    try:
        yield rehearsal
    finally:
        stop_pool_worker(rehearsal.pool_worker)
        for visitor in [organizer, anonymous, *rehearsal.people.values()]:
            visitor.close()


def test_01_the_organizer_creates_the_competition_from_a_bundle(rh: Rehearsal):
    bundle = rh.root / "bundle"
    generate_collection(bundle / "data", n_classes=6, n_images=25,
                        domains=["stripes", "blobs", "spectra", "mosaic"])
    path = write_bundle(bundle, final_test="mosaic")
    home = rh.homes["olga"]
    ok(arena(home, "login", "--server", rh.platform.base_url, "--token", rh.organizer_token))
    created = ok(arena(home, "competition", "create", str(path), "--cache", str(rh.root / "c")))
    assert "rehearsal-cup" in created, created
    with rh.api_as(None) as api:
        comp = api.get("/api/v1/competitions/rehearsal-cup").raise_for_status().json()
    comp_id = comp["id"]
    phases = {p["name"]: p for p in comp["phases"]}
    rh.ids = {"competition": comp_id, "feedback": phases["feedback"]["id"],
              "final": phases["final"]["id"]}
    assert phases["final"]["carry_from_id"] == rh.ids["feedback"]
    rh.done.add("created")

    # anonymous: the competition's tabs and pages, the feedback board; no upload
    page = rh.anonymous.get(f"/competitions/{comp_id}")
    assert page.status_code == 200
    words = text_of(page.text)
    assert "Rehearsal Cup" in words and "Rules" in words and "One team, one final" in words
    assert "Generated Meta-Album domains" in text_of(
        rh.anonymous.get(f"/competitions/{comp_id}?tab=data").text)
    assert "test data" in text_of(rh.anonymous.get(f"/competitions/{comp_id}?tab=terms").text)
    assert rh.anonymous.get(f"/phases/{rh.ids['feedback']}/leaderboard").status_code == 200
    assert rh.anonymous.http.post(f"/api/v1/phases/{rh.ids['feedback']}/submissions",
                                  files={"file": ("m.zip", b"PK")}).status_code == 401


def test_02_the_starting_kit_and_sample_data_download_from_the_platform(rh: Rehearsal):
    rh.needs("created")
    comp = rh.ids["competition"]
    page = rh.anonymous.get(f"/competitions/{comp}").text
    box = page[page.index('id="get-started"'):]
    links = re.findall(r'<a href="([^"]+)"[^>]*download', box[:box.index("</aside>")])
    kit_url, data_url = (f"/competitions/{comp}/kit/starting_kit.zip",
                         f"/competitions/{comp}/kit/sample_data.tar")
    assert kit_url in links and data_url in links, links
    kit = rh.anonymous.get(kit_url)
    assert kit.status_code == 200, kit.text[:300]
    with zipfile.ZipFile(io.BytesIO(kit.content)) as archive:
        names = archive.namelist()
        feedback = json.loads(next(archive.read(n) for n in names
                                   if n.endswith("competition/phases/feedback.json")))
    assert any(n.endswith("competition/example/model.py") for n in names), names[:20]
    assert any(n.endswith("pyproject.toml") for n in names)
    assert "spectra" in json.dumps(feedback["data"])  # the phase's own test datasets
    data = rh.anonymous.get(data_url)
    assert data.status_code == 200
    with tarfile.open(fileobj=io.BytesIO(data.content)) as tar:
        assert "info/meta_splits.txt" in [m.name.removeprefix("./") for m in tar.getmembers()]


def test_03_nine_people_sign_up_on_the_web(rh: Rehearsal):
    rh.needs("created")
    forged = Visitor(rh.platform.base_url, "mallory", "a long password here")
    forged.get("/signup")
    refused = forged.http.post("/signup", data={"csrf_token": "forged", "username": "mallory",
                                                "email": "m@example.org",
                                                "password": "a long password here"})
    assert refused.status_code == 403, refused.status_code
    forged.close()
    for name in PEOPLE:
        person = Visitor(rh.platform.base_url, name, f"{name}-correct-horse-battery")
        answer = person.sign_up(f"{name}@uni.example.org")
        assert answer.status_code == 200 and answer.history[0].status_code == 303, answer.text
        rh.people[name], rh.homes[name] = person, rh.root / f"home-{name}"
        assert name in text_of(person.get("/my").text)
    with rh.platform.api() as admin:  # the admin lists every account
        names = {u["username"] for u in admin.get("/api/v1/users").json()}
    assert set(PEOPLE) <= names
    rh.done.add("signed_up")


def join_competition(rh: Rehearsal, name: str) -> None:
    comp = rh.ids["competition"]
    answer = rh.people[name].submit_form(f"/competitions/{comp}", f"/competitions/{comp}/join",
                                         check=("accept_terms",))
    assert answer.status_code == 200 and "joined=1" in str(answer.url), answer.text[-1500:]


def invite_of(rh: Rehearsal, captain: str) -> str:
    page = rh.people[captain].get(f"/competitions/{rh.ids['competition']}/team").text
    return re.search(r'id="invite-link">([^<]+)<', page).group(1)


def team_words(rh: Rehearsal, name: str) -> str:
    return text_of(rh.people[name].get(f"/competitions/{rh.ids['competition']}/team").text)


def test_04_three_teams_form_by_invite(rh: Rehearsal):
    rh.needs("signed_up")
    comp = rh.ids["competition"]
    for name in PEOPLE:
        if name != LATE:
            join_competition(rh, name)
    for team, (captain, *members) in TEAMS.items():
        created = rh.people[captain].submit_form(f"/competitions/{comp}/team",
                                                 f"/competitions/{comp}/team/create", name=team)
        assert created.status_code == 200 and f"Team {team}" in text_of(created.text)
        link = invite_of(rh, captain)
        assert link.startswith(f"{rh.platform.base_url}/teams/join/"), link
        rh.ids[team] = link  # type: ignore[assignment]
        for member in members:
            if member == LATE:
                continue
            path = link.removeprefix(rh.platform.base_url)
            joined = rh.people[member].submit_form(path, path)
            assert joined.status_code == 200 and f"Team {team}" in text_of(joined.text)
    foxes = team_words(rh, "ana")
    assert all(m in foxes for m in TEAMS["Few-shot Foxes"]), foxes
    # another participant sees no team of hers; anonymous is sent to log in
    assert "Create team" in team_words(rh, SOLO)
    assert "/login" in str(rh.anonymous.get(f"/competitions/{comp}/team").url)
    rh.done.add("teams")


def test_05_a_newcomer_follows_the_invite_before_joining(rh: Rehearsal):
    rh.needs("teams")
    path = rh.ids["Proto Pandas"].removeprefix(rh.platform.base_url)  # type: ignore[union-attr]
    hal = rh.people[LATE]
    page = hal.get(path)
    for _ in range(3):  # each page on the way offers one form to go on with (terms, join)
        assert page.status_code == 200, (page.status_code, text_of(page.text)[:600])
        if "Team Proto Pandas" in text_of(page.text) and LATE in text_of(page.text):
            break
        form = next(f for f in forms_of(page.text) if f.method == "post"
                    and f.action != "/logout")
        page = hal.http.post(form.action, data={**form.fields, **form.checkboxes})
    assert LATE in team_words(rh, "gus") and "Team Proto Pandas" in team_words(rh, LATE)


def ensure_late_member_joined(rh: Rehearsal) -> None:
    """The way that works without the invite fix: join the competition, then the team."""
    if "Team Proto Pandas" in team_words(rh, LATE):
        return
    join_competition(rh, LATE)
    path = rh.ids["Proto Pandas"].removeprefix(rh.platform.base_url)  # type: ignore[union-attr]
    assert rh.people[LATE].submit_form(path, path).status_code == 200
    assert "Team Proto Pandas" in team_words(rh, LATE)


def web_upload(rh: Rehearsal, name: str, archive: Path, results: dict) -> None:
    phase = rh.ids["feedback"]
    with archive.open("rb") as handle:
        answer = rh.people[name].submit_form(
            f"/phases/{phase}/submit", f"/phases/{phase}/submit", method=METHODS[name],
            files={"file": (archive.name, handle, "application/zip")})
    results[name] = answer


def cli_submit(rh: Rehearsal, name: str, folder: Path, results: dict) -> None:
    results[name] = arena(rh.homes[name], "submit", str(folder), "--phase",
                          str(rh.ids["feedback"]), "--method", METHODS[name], "--no-wait")


def test_06_submissions_by_cli_and_web_while_the_host_is_loaded(rh: Rehearsal):
    rh.needs("teams")
    ensure_late_member_joined(rh)
    # Two runs at a time (each phase gives a run 1 CPU); it starts while the uploads go, so
    # its start-up and the first runs load the host too.
    rh.platform.start_worker("w1", ARENA_WORKER_CONCURRENCY="2", **WORKER_ENV)
    folders = rh.root / "models"
    big_cli = model_folder(folders / "ana", weights=WEIGHTS_BYTES, flavour="ana")
    big_web = model_folder(folders / "dia", weights=WEIGHTS_BYTES, flavour="dia")
    from submission_api.submission_zip import build_submission_zip

    big_zip = build_submission_zip(big_web, folders / "dia.zip")
    assert big_zip.stat().st_size >= 40 * 1024**2
    for name in ("ana", "gus", SOLO):
        rh.cli_token(name)
    bundle = rh.root / "bundle"
    write_big_dataset(bundle / "data")
    update = write_bundle(bundle, final_test=BIG_DATASET)
    results: dict = {}
    jobs = [threading.Thread(target=cli_submit, args=(rh, "ana", big_cli, results)),
            threading.Thread(target=web_upload, args=(rh, "dia", big_zip, results)),
            threading.Thread(target=lambda: results.__setitem__("olga", arena(
                rh.homes["olga"], "competition", "update", "--yes", str(update), "--cache",
                str(rh.root / "c"), timeout_s=600)))]
    with cpu_burners(2):
        for job in jobs:
            job.start()
        for job in jobs:
            job.join()
    assert "accepted" in ok(results["ana"])
    assert results["dia"].status_code == 200 and "/submissions/" in str(results["dia"].url), \
        text_of(results["dia"].text)[-800:]
    ok(results["olga"])
    small = build_submission_zip(model_folder(folders / "ben", flavour="ben"), folders / "b.zip")
    web_upload(rh, "ben", small, results)
    assert results["ben"].status_code == 200, text_of(results["ben"].text)[-800:]
    for name in ("gus", SOLO):
        cli_submit(rh, name, model_folder(folders / name, flavour=name), results)
        assert "accepted" in ok(results[name])
    with rh.api_as(None) as api:
        datasets = {d["name"]: d for d in api.get("/api/v1/datasets").json()}
        final = api.get(f"/api/v1/phases/{rh.ids['final']}").json()
    assert datasets[BIG_DATASET]["size_bytes"] >= 100 * 1024**2, datasets[BIG_DATASET]
    assert datasets[BIG_DATASET]["content_hash"] in str(final["data"]["meta_test"])
    for name in ("ana", "ben", "dia", "gus", SOLO):
        with rh.api_as(name) as api:
            mine = api.get("/api/v1/me/submissions",
                           params={"phase_id": rh.ids["feedback"]}).json()
        chosen = [s for s in mine if s["method_name"] == METHODS[name]]
        assert len(chosen) == 1, (name, mine)
        sub = chosen[0]
        rh.subs[name] = sub["id"]
    with rh.api_as("ana") as api:
        assert api.get(f"/api/v1/submissions/{rh.subs['ana']}").json()["size_bytes"] \
            >= 40 * 1024**2
    rh.done.add("submitted")


def submission_status(rh: Rehearsal, who: str | None, submission_id: int) -> int:
    """What `who` (a person, None: the organizer, "anonymous") gets for a submission: the
    page's and the API's status codes must agree."""
    if who == "anonymous":
        page = rh.anonymous.http.get(f"/submissions/{submission_id}", follow_redirects=False)
        api = rh.anonymous.get(f"/api/v1/submissions/{submission_id}")
        assert page.status_code == 303 and "/login" in page.headers["location"]
        return api.status_code
    visitor = rh.organizer if who is None else rh.people[who]
    page = visitor.get(f"/submissions/{submission_id}").status_code
    with rh.api_as(who) as api:
        answer = api.get(f"/api/v1/submissions/{submission_id}").status_code
    assert page == answer, (who, page, answer)
    return answer


def test_07_scored_and_seen_by_the_right_people(rh: Rehearsal):
    rh.needs("submitted")
    token = rh.cli_token("ana")
    finals = {n: rh.platform.wait_terminal(token if n in TEAMS["Few-shot Foxes"] else
                                           rh.organizer_token, i, timeout_s=600)
              for n, i in rh.subs.items()}
    assert {n: s["state"] for n, s in finals.items()} == dict.fromkeys(rh.subs, "finished"), \
        {n: (s["state"], s["reason"], s["message"]) for n, s in finals.items()}
    ana = rh.subs["ana"]
    assert submission_status(rh, "ana", ana) == 200
    assert submission_status(rh, None, ana) == 200
    assert submission_status(rh, SOLO, ana) in (403, 404)  # another participant
    assert submission_status(rh, "dia", ana) in (403, 404)  # another team
    assert submission_status(rh, "anonymous", ana) == 401
    board = rh.anonymous.get(f"/api/v1/phases/{rh.ids['feedback']}/leaderboard").json()
    assert all(e["score"] is not None for e in board["entries"])
    rh.done.add("scored")


def test_08_a_team_mate_opens_and_selects_the_team_entry(rh: Rehearsal):
    rh.needs("scored")
    ana = rh.subs["ana"]
    assert submission_status(rh, "ben", ana) == 200
    selected = rh.people["ben"].submit_form(f"/submissions/{ana}", f"/submissions/{ana}/select")
    assert selected.status_code == 200, text_of(selected.text)[-600:]
    with rh.api_as("ana") as api:
        assert api.get(f"/api/v1/submissions/{ana}").json()["is_selected"]


def test_09_the_feedback_board_has_one_row_per_team_with_its_method(rh: Rehearsal):
    rh.needs("scored")
    board = rh.anonymous.get(f"/api/v1/phases/{rh.ids['feedback']}/leaderboard").json()
    assert len(board["entries"]) == len(TEAMS) + 1, board["entries"]  # three teams and ivy
    words = text_of(rh.anonymous.get(f"/phases/{rh.ids['feedback']}/leaderboard").text)
    for team in TEAMS:
        assert words.count(team) >= 1, (team, words[:2000])
    assert METHODS[SOLO] in words and METHODS["dia"] in words


def test_09b_the_organizer_brings_a_worker_pool_for_the_final(rh: Rehearsal):
    """docs/worker-pools.md, steps 1 and 4, with the organizer's `arena`; its worker comes
    only once the final's runs have waited for it (step 15)."""
    rh.needs("scored")
    home, final = rh.homes["olga"], rh.ids["final"]
    created = arena(home, "pool", "create", "rehearsal-cup", POOL_NAME)
    said = ok(created)
    token = pool_token_of(created.stdout)  # alone on stdout, for a script to capture
    made = re.search(rf"created pool {POOL_NAME} \(id (\d+)\)", said)
    assert made and "shown only now" in created.stderr, said
    pool_id = int(made.group(1))
    attached = ok(arena(home, "pool", "attach", str(final), str(pool_id)))
    assert f"phase {final}: served by pool {pool_id}" in attached, attached
    with rh.api_as(None) as api:
        detail = api.get(f"/api/v1/pools/{pool_id}").json()
    assert detail["phases"] == [{"id": final, "name": "final"}], detail
    assert detail["workers"] == [] and len(detail["credentials"]) == 1, detail
    assert token.startswith(detail["credentials"][0]["prefix"]) and token not in str(detail)
    rh.pool, rh.pool_token = {"id": pool_id, "credential": detail["credentials"][0]["id"]}, token
    with rh.api_as("ana") as api:  # a participant is refused it (another organizer's 404:
        assert api.get(f"/api/v1/pools/{pool_id}").status_code == 403  # the authz matrix)
        assert api.get(f"/api/v1/phases/{final}").json()["serving"]["pool"]
    rh.done.add("pool")


def final_board(rh: Rehearsal, who: str | None) -> dict:
    if who == "anonymous":
        return rh.anonymous.get(f"/api/v1/phases/{rh.ids['final']}/leaderboard").json()
    with rh.api_as(who) as api:
        return api.get(f"/api/v1/phases/{rh.ids['final']}/leaderboard").json()


def stop_workers(rh: Rehearsal) -> None:
    """A clean stop (SIGTERM, as an operator's), so that the final's runs stay queued."""
    import os

    for worker in rh.platform.workers:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(timeout=60)


def test_10_the_feedback_phase_closes_into_the_secret_final(rh: Rehearsal):
    rh.needs("scored")
    stop_workers(rh)
    with rh.api_as(None) as api:
        closed = api.post(f"/api/v1/phases/{rh.ids['feedback']}/close")
    assert closed.status_code == 200, closed.text
    rh.carried = closed.json()["carried"][str(rh.ids["final"])]
    assert rh.carried, closed.json()
    rh.done.add("carried")
    for who in ("ana", "ben", SOLO, "anonymous"):  # the final is secret until published
        board = final_board(rh, who)
        assert all(e["score"] is None and e["rank"] is None
                   for e in board.get("entries", [])), (who, board)
    with rh.api_as("ana") as api:
        mine = api.get("/api/v1/me/submissions", params={"phase_id": rh.ids["final"]}).json()
    assert all(s["score"] is None for s in mine)


def test_10b_participants_read_that_no_worker_serves_the_final(rh: Rehearsal):
    rh.needs("carried", "pool")
    final = rh.ids["final"]
    with rh.api_as("dia") as api:  # the Owls' one entry was dia's own
        serving = api.get(f"/api/v1/phases/{final}").json()["serving"]
    assert serving["pool"] and serving["live_workers"] == 0, serving
    assert serving["message"] == "no worker is serving this phase", serving
    position = serving["queue_position"]
    assert isinstance(position, int) and 1 <= position <= len(rh.carried), serving
    page = text_of(rh.people["dia"].get(f"/phases/{final}").text)
    assert "No worker is serving this phase" in page, page[:2000]
    assert f"Your run is number {position} in this phase's queue" in page, page[:2000]
    assert "No worker is serving this phase" in text_of(rh.anonymous.get(f"/phases/{final}").text)
    with rh.api_as(None) as api:  # the carried runs wait in the pool's queue, not the broker's
        queue = api.get(f"/api/v1/pools/{rh.pool['id']}").json()["queue"]
        lines = {e["queue"] for e in api.get("/api/v1/queue", params={"phase_id": final}).json()}
    assert queue["queued"] >= len(rh.carried), queue
    assert lines == {f"pool:{rh.pool['id']}"}, lines


def test_11_the_final_has_one_entry_per_team_with_its_name_and_method(rh: Rehearsal):
    rh.needs("carried")
    copies = final_submissions(rh)
    by_origin = {s["carried_from_id"]: s for s in copies}
    assert len(copies) == len(TEAMS) + 1, copies  # one per team, and ivy's
    with rh.api_as(None) as api:
        teams = {t["id"]: t["name"] for t in api.get(
            f"/api/v1/competitions/{rh.ids['competition']}/teams").json()}
    assert sorted(teams[s["team_id"]] for s in copies if s["team_id"]) == sorted(TEAMS)
    assert by_origin[rh.subs["ana"]]["method_name"] == METHODS["ana"]  # ben selected it
    assert by_origin[rh.subs["dia"]]["method_name"] == METHODS["dia"]


def final_submissions(rh: Rehearsal) -> list[dict]:
    with rh.api_as(None) as api:
        return [api.get(f"/api/v1/submissions/{i}").json() for i in rh.carried]


def carried_copy(rh: Rehearsal, origin: int) -> dict:
    copies = [s for s in final_submissions(rh) if s["carried_from_id"] == origin]
    assert copies, f"submission {origin} was not carried: {rh.carried}"
    return copies[0]


def test_12_a_disqualification_after_the_carry_reaches_the_carried_copy(rh: Rehearsal):
    rh.needs("carried")
    origin = rh.subs[SOLO]
    copy = carried_copy(rh, origin)
    form = rh.organizer.form(f"/submissions/{origin}", f"/submissions/{origin}/disqualify")
    reason = {"reason": "same code as another entry"} if "reason" in form.fields else {}
    answer = rh.organizer.submit_form(f"/submissions/{origin}",
                                      f"/submissions/{origin}/disqualify", **reason)
    assert answer.status_code == 200, text_of(answer.text)[-600:]
    with rh.api_as(None) as api:
        after = api.get(f"/api/v1/submissions/{copy['id']}").json()
    assert after["disqualified_at"] is not None, after
    assert all(r["state"] in TERMINAL for r in after["runs"]), after["runs"]
    entries = final_board(rh, None)["entries"]
    assert copy["id"] not in [e["submission_id"] for e in entries]
    with rh.api_as(SOLO) as api:  # the owner reads why
        mine = api.get(f"/api/v1/submissions/{origin}").json()
    assert mine["disqualified_reason"]


def test_13_fact_sheets_are_answered_and_exported(rh: Rehearsal):
    rh.needs("carried")
    final = rh.ids["final"]
    saved = rh.people["ana"].submit_form(f"/phases/{final}/factsheet",
                                         f"/phases/{final}/factsheet",
                                         **{"q-approach": "Class centroids, big weights unused.",
                                            "q-pretrained": "no"})
    assert saved.status_code == 200 and "answers are saved" in text_of(saved.text)
    rh.cli_token("dia")
    answers = rh.root / "dia-answers.yaml"
    answers.write_text("approach: Centroids, uploaded through the web.\npretrained: 'yes'\n")
    ok(arena(rh.homes["dia"], "factsheet", str(final), str(answers)))
    with rh.api_as(None) as api:
        exported = api.get(f"/api/v1/phases/{final}/factsheet/answers", params={"format": "csv"})
    assert exported.status_code == 200, exported.text
    assert "Class centroids, big weights unused." in exported.text
    assert "Centroids, uploaded through the web." in exported.text
    with rh.api_as(SOLO) as api:
        assert api.get(f"/api/v1/phases/{final}/factsheet/answers").status_code == 403
    assert rh.anonymous.get(f"/api/v1/phases/{final}/factsheet/answers").status_code == 401
    rh.done.add("factsheets")


def test_14_publishing_is_refused_while_runs_are_pending(rh: Rehearsal):
    rh.needs("carried")
    final = rh.ids["final"]
    with rh.api_as(None) as api:
        assert api.post(f"/api/v1/phases/{final}/close").status_code == 200
        pending = [s["id"] for s in final_submissions(rh) if s["state"] not in TERMINAL]
        assert pending, "no run of the final is pending: the refusal is not tested"
        refused = api.post(f"/api/v1/phases/{final}/publish")
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["code"] == "phase.runs_pending", refused.text


def test_15_the_published_final_ranks_one_entry_per_team(rh: Rehearsal):
    rh.needs("carried", "pool")
    # The final is the pool's: its organizer's worker evaluates it, as the docs start one; a
    # shared worker runs beside it and must take none of its runs.
    rh.platform.start_worker("w2", ARENA_WORKER_CONCURRENCY="2", **WORKER_ENV)
    rh.pool_worker = start_pool_worker(rh.root, rh.platform.base_url, rh.pool_token)
    final = rh.ids["final"]
    finished = []
    with HeldRuns(rh.platform.base_url, rh.organizer_token, rh.pool["id"]) as held:
        for sub in final_submissions(rh):
            done = rh.platform.wait_terminal(rh.organizer_token, sub["id"], 600)
            expected = "cancelled" if sub["carried_from_id"] == rh.subs[SOLO] else "finished"
            if done["state"] != expected:
                with rh.api_as(None) as api:
                    logs = api.get(f"/api/v1/submissions/{sub['id']}/logs").text
                pytest.fail(f"final entry {sub['id']} (from {sub['carried_from_id']}): "
                            f"{done['state']} ({done['reason']}): {done['message']}\n"
                            f"{logs[-3000:]}")
            finished += [r["id"] for r in done["runs"] if r["state"] == "finished"]
    assert finished and all(held.by_pool_worker.get(r) for r in finished), \
        (finished, held.by_pool_worker)  # each run held by the pool's worker row
    owners = {o for r in finished for o in held.owners.get(r, set())}
    assert owners and all(o.startswith(f"{POOL_WORKER}/") for o in owners), owners
    assert rh.pool_worker.poll() is None, "the pool worker stopped while serving"
    with rh.api_as(None) as api:
        published = api.post(f"/api/v1/phases/{final}/publish")
        results = api.get(f"/api/v1/submissions/{carried_copy(rh, rh.subs['dia'])['id']}"
                          "/results").json()
    assert published.status_code == 200, published.text
    assert BIG_DATASET in json.dumps(results["runs"][0]["summary"])  # the final's 108 MB data
    rh.done.add("published")
    for who in ("ana", "ben", SOLO, "anonymous", None):
        board = final_board(rh, who)
        assert board["entries"] and all(e["score"] is not None for e in board["entries"]), who
    with rh.api_as(None) as api:
        csv_text = api.get(f"/api/v1/phases/{final}/leaderboard", params={"format": "csv"}).text
    assert sorted(team for team in TEAMS if csv_text.count(team) == 1) == sorted(TEAMS), csv_text
    assert METHODS["ana"] in csv_text and METHODS["dia"] in csv_text, csv_text
    assert len(final_board(rh, "anonymous")["entries"]) == len(TEAMS)  # ivy's copy left
    page = text_of(rh.anonymous.get(f"/phases/{final}/leaderboard").text)
    assert all(team in page for team in TEAMS) and METHODS[SOLO] not in page


def test_15b_the_organizer_revokes_the_pool_credential_and_its_worker_stops(rh: Rehearsal):
    rh.needs("published", "pool")
    assert rh.pool_worker is not None and rh.pool_worker.poll() is None
    pool, credential = rh.pool["id"], rh.pool["credential"]
    said = ok(arena(rh.homes["olga"], "pool", "revoke", str(pool), str(credential)))
    assert f"credential {credential} of pool {pool} revoked" in said, said
    assert rh.pool_worker.wait(timeout=90) == 3  # EXIT_REVOKED, as the docs say
    log = (rh.root / f"worker-{POOL_WORKER}.log").read_text()
    assert "no broker is used" in log and "pool.revoked" in log, log[-3000:]
    with rh.api_as(None) as api:
        detail = api.get(f"/api/v1/pools/{pool}").json()
    assert detail["credentials"][0]["revoked_at"] is not None, detail
    assert {w["name"].split("/")[0] for w in detail["workers"]} == {POOL_WORKER}, detail


def test_16_a_browser_shows_the_key_pages_at_1400_and_400_px(rh: Rehearsal):
    rh.needs("published")
    shots = rh.root / "screenshots"
    comp, final = rh.ids["competition"], rh.ids["final"]
    with chromium() as browser:
        visitor = browser.new_context(base_url=rh.platform.base_url).new_page()
        visitor.goto(f"/competitions/{comp}")
        screenshots(visitor, shots, "competition-anonymous", ("Rehearsal Cup", "Get started"))
        visitor.goto(f"/phases/{final}/leaderboard")
        screenshots(visitor, shots, "final-board-anonymous", tuple(TEAMS))

        ana = browser.new_context(base_url=rh.platform.base_url).new_page()
        ana.goto("/login")
        ana.locator("#username").fill("ana")
        ana.locator("#password").fill(rh.people["ana"].password)
        ana.get_by_role("button", name="Log in", exact=True).click()
        ana.wait_for_url(re.compile(r"/my$"))
        ana.goto(f"/competitions/{comp}/team")
        screenshots(ana, shots, "team-ana", ("Team Few-shot Foxes", "ben", "cam"))
        ana.goto(f"/submissions/{rh.subs['ana']}")
        screenshots(ana, shots, "submission-ana", (METHODS["ana"],))

        olga = browser.new_context(base_url=rh.platform.base_url).new_page()
        olga.goto("/login")
        olga.locator("#token").fill(rh.organizer_token)
        olga.get_by_role("button", name="Use this token").click()
        olga.wait_for_url(re.compile(r"/organizer$"))
        screenshots(olga, shots, "organizer-dashboard", ("Rehearsal Cup", "final"))
        on_screen_at_400(olga, 'td[data-label="Actions"] a, td[data-label="Actions"] button')
        olga.goto(f"/submissions/{rh.subs[SOLO]}")
        screenshots(olga, shots, "disqualified-submission", ("same code as another entry",))
        on_screen_at_400(olga, "form[action$='/disqualify'] button")
    print(f"screenshots in {shots}")
