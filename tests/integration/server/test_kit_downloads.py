"""The starting kit and sample data download from the competition's own server (issue 32.4):
the bundle's `kit:` section (files and a sample collection) is uploaded by `arena competition
create`; the kit zip is pip-installable offline (the participant packages, no platform), holds
the bundle's files and each phase's protocol; the Get-started box gives the exact commands on
the address the participant used, or on ARENA_PUBLIC_URL when set."""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import zipfile

from test_cli_participant import _token, arena_cli  # noqa: F401 - the CLI fixture

from submission_api.data import load_collection
from submission_api.safe_tar import extract_tar

BUNDLE = """slug: kitdemo
title: Kit demo
kit:
  files: [example]
  sample_data: data
phases:
  - name: feedback
    status: open
    data:
      path: data
      meta_train: [stripes, blobs]
      meta_test: [glyphs]
"""


def _create(env, arena_cli, tmp_path, tiny_collection) -> int:  # noqa: F811
    folder = tmp_path / "bundle"
    (folder / "example").mkdir(parents=True)
    (folder / "example" / "model.py").write_text("class MyMetaLearner: ...\n")
    (folder / "data").symlink_to(tiny_collection, target_is_directory=True)
    (folder / "competition.yaml").write_text(BUNDLE)
    _, headers = env.user("olga", role="organizer")
    code, out = arena_cli("competition", "create", str(folder / "competition.yaml"), "--cache",
                          str(tmp_path / "cache"), token=_token(headers))
    assert code == 0, out
    assert "sample data sent" in out and "kit files sent: example" in out
    return env.client.get("/api/v1/competitions/kitdemo").json()["id"]


def test_the_bundles_kit_and_sample_data_download_and_the_kit_installs_offline(
        env, arena_cli, tmp_path, tiny_collection):  # noqa: F811
    comp_id = _create(env, arena_cli, tmp_path, tiny_collection)
    sample = env.client.get(f"/competitions/{comp_id}/kit/sample_data.tar")
    assert sample.status_code == 200, sample.text
    with tarfile.open(fileobj=io.BytesIO(sample.content)) as tar:
        extract_tar(tar, tmp_path / "sample_data")  # Debian 12's 3.11.2 has no filter=
    collection = load_collection(tmp_path / "sample_data", tmp_path / "c2")
    assert collection.splits["meta-test"] == ["spectra", "mosaic"]
    kit = env.client.get(f"/competitions/{comp_id}/kit/starting_kit.zip")
    assert kit.status_code == 200, kit.text
    env.clock.advance(minutes=5)  # built once per content: the same file a moment later
    assert env.client.get(f"/competitions/{comp_id}/kit/starting_kit.zip").content == kit.content
    with zipfile.ZipFile(io.BytesIO(kit.content)) as archive:
        names = set(archive.namelist())
        archive.extractall(tmp_path / "unzipped")
    assert {"arena-kit/pyproject.toml", "arena-kit/starting_kit/cli.py",
            "arena-kit/competition/example/model.py",
            "arena-kit/competition/phases/feedback.json"} <= names
    assert not any(n.startswith(("arena-kit/server/", "arena-kit/worker/")) for n in names)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
         "-w", str(tmp_path / "wheels"), str(tmp_path / "unzipped" / "arena-kit")],
        capture_output=True, text=True, timeout=300, check=False)
    assert built.returncode == 0, built.stdout + built.stderr
    [wheel] = (tmp_path / "wheels").glob("*.whl")
    wheel_names = zipfile.ZipFile(wheel).namelist()
    assert "starting_kit/baselines/protonet/model.py" in wheel_names
    assert "submission_api/report/templates/detailed_results.html.j2" in wheel_names or any(
        n.startswith("submission_api/report/templates/") for n in wheel_names)
    assert not any(n.startswith("server/") for n in wheel_names)


def test_get_started_gives_the_exact_commands_on_the_address_used_or_the_public_url(
        env, arena_cli, tmp_path, tiny_collection):  # noqa: F811
    comp_id = _create(env, arena_cli, tmp_path, tiny_collection)
    page = env.client.get(f"/competitions/{comp_id}").text
    base = "http://testserver"
    assert f"curl -fLO {base}/competitions/{comp_id}/kit/starting_kit.zip" in page
    assert "pip install ./arena-kit" in page
    assert f"curl -fLO {base}/competitions/{comp_id}/kit/sample_data.tar" in page
    assert "--protocol-file arena-kit/competition/phases/feedback.json" in page
    assert f"arena login --server {base} --token" in page
    assert "127.0.0.1:8000" not in page
    env.client.app.state.settings.public_url = "https://arena.example.org"
    page = env.client.get(f"/competitions/{comp_id}").text
    assert "arena login --server https://arena.example.org --token" in page
    assert "curl -fLO https://arena.example.org/competitions/" in page


def test_no_sample_data_is_a_404_that_says_how_to_make_some(env):
    phase = env.phase()
    answer = env.client.get(f"/competitions/{phase.competition_id}/kit/sample_data.tar")
    assert answer.status_code == 404
    assert "arena data generate sample_data" in answer.text
    assert env.client.get("/kit/starting_kit.zip").status_code == 200


def test_a_missing_kit_path_is_refused_before_anything_is_sent(
        env, arena_cli, tmp_path, tiny_collection):  # noqa: F811
    folder = tmp_path / "bundle"
    folder.mkdir()
    (folder / "data").symlink_to(tiny_collection, target_is_directory=True)
    (folder / "competition.yaml").write_text(BUNDLE)  # no example/ folder
    _, headers = env.user("olga", role="organizer")
    code, out = arena_cli("competition", "create", str(folder / "competition.yaml"), "--cache",
                          str(tmp_path / "cache"), token=_token(headers))
    assert code == 1 and "competition.yaml:4: kit.files: 'example' does not exist" in \
        " ".join(out.split()), out
    assert env.client.get("/api/v1/competitions").json() == []


def test_arena_public_url_sets_the_public_url_and_the_older_setting(monkeypatch):
    from server.core.config import Settings

    monkeypatch.setenv("ARENA_PUBLIC_URL", "https://arena.example.org/")
    settings = Settings()
    assert settings.public_url_for("http://10.0.0.5:8000/") == "https://arena.example.org"
    assert settings.public_base_url == "https://arena.example.org/"
    monkeypatch.delenv("ARENA_PUBLIC_URL")
    assert Settings().public_url_for("http://10.0.0.5:8000/") == "http://10.0.0.5:8000"


def test_links_shown_to_the_requester_follow_the_address_used_unless_a_url_is_configured(
        monkeypatch):
    """The team page's invite and the API's reset link named 127.0.0.1:8000 on any deployment
    but the demo (issue 32.4); a URL the operator set, old or new setting, still wins."""
    from server.core.config import Settings

    for name in ("ARENA_PUBLIC_URL", "ARENA_PUBLIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    assert Settings().public_url_for("http://10.0.0.5:8000/") == "http://10.0.0.5:8000"
    older = Settings(public_base_url="https://old.example.org")
    assert older.public_url_for("http://10.0.0.5:8000/") == "https://old.example.org"

