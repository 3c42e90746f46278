"""`arena submit` makes the import check `arena zip` and `arena run` make (issue 32.5): a zip
importing a module the phase's sandbox image lacks spent quota on `import_error`; it is now
refused before the upload with the same warning, unless --skip-import-check."""

from __future__ import annotations

import pytest
import typer
from _server_support import MODEL, zip_bytes
from typer.testing import CliRunner

from starting_kit.commands import remote
from starting_kit.commands.remote_client import ArenaClient


@pytest.fixture
def arena_cli(env, monkeypatch):
    """Run `arena …` with its HTTP going to the test app; returns (exit code, output)."""
    monkeypatch.setattr(ArenaClient, "connect",
                        classmethod(lambda cls, server, token, timeout_s=60.0:
                                    cls(env.client, token)))
    monkeypatch.setenv("COLUMNS", "300")
    app = typer.Typer()
    remote.register(app)

    def run(*args: str, token: str) -> tuple[int, str]:
        result = CliRunner().invoke(app, [*args, "--server", "http://testserver",
                                          "--token", token])
        return result.exit_code, result.output

    return run


def test_submit_refuses_a_zip_the_sandbox_cannot_import_before_the_upload(env, arena_cli,
                                                                         tmp_path):
    _, headers = env.user("ann")
    token = headers["Authorization"].split()[1]
    phase_id = env.phase(quota_total=3).id
    archive = tmp_path / "s.zip"
    archive.write_bytes(zip_bytes([("model.py", b"import sklearn.linear_model\n" + MODEL)]))
    code, out = arena_cli("submit", str(archive), "--phase", str(phase_id), "--no-wait",
                          token=token)
    flat = " ".join(out.split())
    assert code == 1, out
    assert "imports sklearn" in flat and "import_error" in flat  # the zip/run warning
    assert "nothing was uploaded" in flat and "--skip-import-check" in flat
    assert env.queue.jobs == []
    code, out = arena_cli("submit", str(archive), "--phase", str(phase_id), "--no-wait",
                          "--skip-import-check", token=token)
    assert code == 0 and "quota left: 2 of 3" in " ".join(out.split()), out
    clean = tmp_path / "clean.zip"
    clean.write_bytes(zip_bytes())
    code, out = arena_cli("submit", str(clean), "--phase", str(phase_id), "--no-wait",
                          token=token)
    assert code == 0 and "warning" not in out, out
