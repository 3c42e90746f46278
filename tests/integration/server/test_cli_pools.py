"""`arena pool` (issue 37) against the real app: an organizer creates a pool, gets its credential
once, lists, shows, issues and revokes credentials and attaches a phase; each refusal (another
role, another organizer's pool, a taken name) is a sentence that says what to do. The printed
credential is the one the worker's internal API takes, and revoking it stops the next call."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner


@pytest.fixture
def arena(env, monkeypatch):
    """Run `arena ...` as the holder of `headers` against the in-process app; returns
    (exit code, stdout, stderr)."""
    from starting_kit import cli as arena_cli
    from starting_kit.commands import remote_client

    monkeypatch.setattr(remote_client.ArenaClient, "connect",
                        classmethod(lambda cls, server, token, timeout_s=60.0:
                                    cls(env.client, token)))
    arena_cli._mount_plugins()
    runner = CliRunner()

    def run(headers: dict, *args: str) -> tuple[int, str, str]:
        token = headers["Authorization"].removeprefix("Bearer ")
        result = runner.invoke(arena_cli.app, [*args, "--server", "http://t", "--token", token])
        return result.exit_code, result.stdout, result.stderr

    return run


def _pool_call(env, token: str):
    return env.client.post("/internal/pool/jobs", headers={"X-Arena-Pool-Token": token},
                           json={"worker": "lab-1", "host": "gpu-host", "gpus": ["0"],
                                 "images": ["metadl-arena/sandbox:gpu"]})


def test_an_organizer_manages_a_pool_from_the_cli(env, arena):
    olga, org = env.user("olga", role="organizer")
    phase = env.phase(olga)
    with env.db.session() as s:
        from server.models import Competition

        slug = s.get(Competition, phase.competition_id).slug

    code, out, err = arena(org, "pool", "create", slug, "lab-gpus")
    assert code == 0, err
    token = out.strip()
    assert re.fullmatch(r"arena_pool_[A-Za-z0-9_-]{40,}", token), out  # alone on stdout
    assert "shown only now" in err and "arena worker --pool-token" in err
    assert token not in err  # the worker line names a prefix, not the secret twice
    assert _pool_call(env, token).status_code in (200, 204)

    code, out, err = arena(org, "pool", "list", slug)
    assert code == 0 and "lab-gpus" in out, err
    pool_id = int(re.search(r"^\D*(\d+)\D+lab-gpus", out, re.MULTILINE).group(1))

    code, out, err = arena(org, "pool", "attach", str(phase.id), str(pool_id))
    assert (code, out.strip()) == (0, f"phase {phase.id}: served by pool {pool_id}"), err

    code, out, err = arena(org, "pool", "show", str(pool_id))
    assert code == 0, err
    assert f"dev (id {phase.id})" in out and token[:12] in out
    assert "lab-1" in out and "gpu-host" in out  # the worker's heartbeat above

    code, out, err = arena(org, "pool", "token", str(pool_id))
    second = out.strip()
    assert code == 0 and second.startswith("arena_pool_") and second != token, err

    shown = env.client.get(f"/api/v1/pools/{pool_id}", headers=org).json()["credentials"]
    prefixes = [c["prefix"] for c in shown]  # the marker and 8 of the 43 random characters
    assert sorted(prefixes) == sorted([token[:19], second[:19]]), prefixes
    first_id = next(c["id"] for c in shown if token.startswith(c["prefix"]))
    code, out, err = arena(org, "pool", "revoke", str(pool_id), str(first_id))
    assert code == 0 and "revoked" in out, err
    assert _pool_call(env, token).status_code == 401  # the worker's next call is refused
    assert _pool_call(env, second).status_code in (200, 204)

    code, out, err = arena(org, "pool", "attach", str(phase.id), "--detach")
    assert (code, out.strip()) == (0, f"phase {phase.id}: served by the platform's shared "
                                      "workers"), err


def test_refusals_say_what_to_do(env, arena):
    olga, org = env.user("olga", role="organizer")
    _, other = env.user("otto", role="organizer")
    _, ann = env.user("ann")
    phase = env.phase(olga)
    code, out, err = arena(org, "pool", "create", str(phase.competition_id), "lab")
    assert code == 0, err
    pool_id = env.client.get(f"/api/v1/competitions/{phase.competition_id}/pools",
                             headers=org).json()[0]["id"]

    code, _out, err = arena(org, "pool", "create", str(phase.competition_id), "lab")
    assert code == 1 and "already has a pool named 'lab': choose another name" in err

    code, _out, err = arena(other, "pool", "show", str(pool_id))  # another organizer's pool
    assert code == 1 and "does not exist or is not yours" in err, err
    code, _out, err = arena(other, "pool", "token", str(pool_id))
    assert code == 1 and "does not exist or is not yours" in err, err
    assert len(env.client.get(f"/api/v1/pools/{pool_id}",
                              headers=org).json()["credentials"]) == 1  # nothing issued

    code, _out, err = arena(ann, "pool", "create", str(phase.competition_id), "mine")
    assert code == 1 and ("only the organizers" in err or "is not yours" in err), err

    code, _out, err = arena({"Authorization": "Bearer wrong"}, "pool", "list",
                            str(phase.competition_id))
    assert code == 1 and "arena login --server URL --token TOKEN" in err, err

    code, _out, err = arena(org, "pool", "attach", str(phase.id))
    assert code == 2 and "give a POOL id, or --detach" in err  # neither: a usage error


def test_an_admin_lists_every_pool_and_an_organizer_only_theirs(env, arena):
    olga, org = env.user("olga", role="organizer")
    otto, other = env.user("otto", role="organizer")
    _, admin = env.user("root", role="admin")
    mine, theirs = env.phase(olga), env.phase(otto)
    assert arena(org, "pool", "create", str(mine.competition_id), "olga-lab")[0] == 0
    assert arena(other, "pool", "create", str(theirs.competition_id), "otto-lab")[0] == 0

    code, out, err = arena(admin, "pool", "list")
    assert code == 0 and "olga-lab" in out and "otto-lab" in out, err
    assert f"(id {theirs.competition_id})" in out
    code, out, err = arena(org, "pool", "list", str(mine.competition_id))
    assert code == 0 and "olga-lab" in out and "otto-lab" not in out, err
    code, _out, err = arena(org, "pool", "list", str(theirs.competition_id))
    assert code == 1 and "otto-lab" not in err
    code, _out, err = arena(org, "pool", "list")  # every pool: the operator's view only
    assert code == 1 and "only an admin lists every competition's pools" in err, err


def test_a_participant_following_a_submission_is_told_no_worker_serves_it(env):
    """`arena submit` follows its submission: waiting in a pool phase with no live worker, it
    says so instead of only a queue position; once a worker calls in, it says no more."""
    from starting_kit.commands.remote_client import ArenaClient, follow

    olga, org = env.user("olga", role="organizer")
    _, ann = env.user("ann")
    phase = env.phase(olga)
    made = env.client.post(f"/api/v1/competitions/{phase.competition_id}/pools", headers=org,
                           json={"name": "lab"}).json()
    env.client.put(f"/api/v1/phases/{phase.id}/pool", headers=org,
                   json={"pool_id": made["pool"]["id"]})
    submission = env.submit(phase.id, ann).json()["id"]
    client = ArenaClient(env.client, ann["Authorization"].removeprefix("Bearer "))
    said: list[str] = []

    def stop_after_two_polls(_seconds: float) -> None:
        if len(polls) == 2:
            raise StopIteration
        polls.append(1)
        assert _pool_call(env, made["token"]).status_code in (200, 204)  # a worker calls in

    polls: list[int] = []
    clock = iter(range(0, 10_000, 100))
    with pytest.raises(StopIteration):
        follow(client, submission, sleep=stop_after_two_polls, say=said.append,
               clock=lambda: float(next(clock)), remind_s=60)
    assert said[0].startswith(f"submission {submission}: queued")
    assert "no worker is serving this phase" in said[0]
    assert said[1:] and all("no worker is serving" not in line for line in said[1:]), said
