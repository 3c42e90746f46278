"""A dataset tar that unpacks to nothing is the organizer's mistake, said as one (issue 32.5:
it answered 500 from `_entry_root` listing a folder the empty tar never created)."""

from __future__ import annotations

import io
import tarfile

import pytest


def _tar(members: list[str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name in members:
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE
            tar.addfile(info)
    return buf.getvalue()


@pytest.mark.parametrize("members", [[], ["."]], ids=["no-member", "only-dot"])
def test_an_empty_dataset_tar_is_a_422_saying_what_to_send(env, members):
    _, org = env.user("olga", role="organizer")
    answer = env.client.post("/api/v1/datasets", headers=org,
                             files={"file": ("d.tar", _tar(members), "application/x-tar")})
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "dataset.invalid"
    assert "holds no file" in error["message"] and "arena data compile" in error["message"]
