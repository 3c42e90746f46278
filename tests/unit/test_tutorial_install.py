"""The tutorial's install says what works (issue 24, trap 9): no `pip install metadl-arena`
(nothing is published under that name), the CPU-only torch line beside `pip install .` (which
would otherwise bring ~5.7 GB of CUDA torch), and `arena submit` in the participant install —
checked by running it with the platform's packages made unimportable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TUTORIAL = (ROOT / "starting_kit" / "tutorial.md").read_text()


def test_the_tutorial_installs_from_a_clone_with_cpu_only_torch_documented():
    assert "pip install metadl-arena" not in TUTORIAL
    assert "download.pytorch.org/whl/cpu" in TUTORIAL and "pip install ." in TUTORIAL
    assert "5.7 GB" in TUTORIAL
    assert "platform extra" not in TUTORIAL


def test_arena_submit_needs_no_platform_extra():
    blocked = ("fastapi", "sqlalchemy", "celery", "alembic", "uvicorn", "docker")
    code = ("import sys\n"
            f"for name in {blocked!r}: sys.modules[name] = None\n"
            "from typer.testing import CliRunner\n"
            "from starting_kit.cli import app, _mount_plugins\n"
            "_mount_plugins()\n"
            "result = CliRunner().invoke(app, ['submit', '--help'])\n"
            "print(result.output); sys.exit(result.exit_code)\n")
    answer = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT, timeout=120)
    assert answer.returncode == 0, answer.stdout + answer.stderr
    assert "--phase" in answer.stdout
