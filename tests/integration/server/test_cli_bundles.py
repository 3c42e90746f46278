"""`arena competition create` with broken bundles (issue 14, item 11): every problem printed
once, as `file:line: where: what` with the fix, never a traceback; unknown keys get a "did you
mean"; an unknown local dataset is caught before anything is compiled or uploaded; pydantic's
patterns print as they are (not eaten as rich markup)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cli_participant import _token, arena_cli  # noqa: F401 - the CLI fixture

BUNDLE = """slug: demo
title: Demo
phases:
  - name: feedback
    starts_at: 2031-01-01T00:00:00Z
    data:
      path: data
      meta_train: [stripes, blobs]
      meta_test: [glyphs]
    quotas: {per_day: 2}
"""


@pytest.fixture
def bundle_dir(tmp_path, tiny_collection) -> Path:
    folder = tmp_path / "bundle"
    folder.mkdir()
    (folder / "data").symlink_to(tiny_collection, target_is_directory=True)
    return folder


def create(arena_cli, env, bundle_dir: Path, text: str) -> tuple[int, str]:  # noqa: F811
    _, headers = env.user("olga", role="organizer")
    path = bundle_dir / "competition.yaml"
    path.write_text(text)
    return arena_cli("competition", "create", str(path), "--cache",
                     str(bundle_dir / "cache"), token=_token(headers))


@pytest.mark.parametrize(("old", "new", "expected"), [
    ("2031-01-01T00:00:00Z", "2022-13-45", ":5: value: '2022-13-45' is not a date (month must "
     "be in 1..12); expected YYYY-MM-DD"),
    ("    quotas:", "    quotass:", ":10: phases[0].quotass: unknown key 'quotass'; did you "
     "mean 'quotas'?"),
    ("{per_day: 2}", "{per_dya: 2}", ":10: phases[0].quotas.per_dya: unknown key 'per_dya'; "
     "did you mean 'per_day'?"),
    ("slug: demo", "slug: '^*$'", ":1: slug: String should match pattern "
     "'^[a-z0-9][a-z0-9-]*$' (got '^*$'); use lowercase letters"),
    ("meta_test: [glyphs]", "meta_test: [glyph]", ":9: dataset 'glyph' is not in the local "
     "collection"),
])
def test_a_broken_bundle_is_explained_by_file_and_line_without_traceback(
        env, arena_cli, bundle_dir, old, new, expected):  # noqa: F811
    code, out = create(arena_cli, env, bundle_dir, BUNDLE.replace(old, new))
    flat = " ".join(out.split())
    assert code == 1, out
    assert "Traceback" not in out
    assert f"competition.yaml{expected}" in flat, out
    problem = expected.split(": ", 2)[-1][:30]
    assert flat.count(problem) == 1, f"printed more than once: {out}"


def test_an_unknown_dataset_suggests_the_closest_name_and_uploads_nothing(
        env, arena_cli, bundle_dir):  # noqa: F811
    code, out = create(arena_cli, env, bundle_dir, BUNDLE.replace("[glyphs]", "[glyph]"))
    assert code == 1 and "did you mean 'glyphs'?" in out
    assert env.client.get("/api/v1/competitions").json() == []


def test_the_cpu_example_bundle_gives_an_open_phase_with_start(env, arena_cli, bundle_dir):  # noqa: F811
    example = Path(__file__).resolve().parents[3] / "examples" / "neurips22"
    text = (example / "competition-cpu.yaml").read_text()
    _, headers = env.user("olga", role="organizer")
    (bundle_dir / "competition-cpu.yaml").write_text(text)
    for name in ("resnet18_protonet", "README.md"):  # its kit: files (issue 32.4)
        (bundle_dir / name).symlink_to(example / name)
    code, out = arena_cli("competition", "create", str(bundle_dir / "competition-cpu.yaml"),
                          "--cache", str(bundle_dir / "cache"), "--start",
                          env.clock.now.strftime("%Y-%m-%dT%H:%M:%SZ"), token=_token(headers))
    assert code == 0, out
    phases = {p["name"]: p for p in env.client.get("/api/v1/phases").json()}
    assert phases["public"]["status"] == "open" and phases["public"]["accepting_submissions"]
    assert phases["feedback"]["status"] == "upcoming"
