"""Dependencies point one way (DESIGN.md): submission_api imports no platform code or framework,
the server does not import the worker, and the participant side runs with numpy and torch alone
(the sandbox image has nothing else but pillow)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FRAMEWORKS = {"fastapi", "celery", "sqlalchemy", "docker", "alembic", "redis", "kombu", "uvicorn"}


def imported_roots(package: str) -> dict[str, set[str]]:
    """Top-level module names each file of a package imports (absolute imports)."""
    found: dict[str, set[str]] = {}
    for path in (ROOT / package).rglob("*.py"):
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(ROOT))] = names
    return found


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("submission_api", FRAMEWORKS | {"server", "worker", "starting_kit"}),
        ("server", {"worker"}),
        ("worker", {"server", "fastapi", "sqlalchemy", "alembic"}),
        ("starting_kit", FRAMEWORKS | {"worker"}),
    ],
)
def test_imports_point_one_way(package, forbidden):
    roots = imported_roots(package)
    offenders = {f: sorted(n & forbidden) for f, n in roots.items() if n & forbidden}
    # The CLI composition root and the demo may name platform commands; nothing else may.
    offenders.pop("server/cli.py", None)
    offenders.pop("server/demo.py", None)
    assert offenders == {}


PARTICIPANT_SIDE = """
import sys
import submission_api.runner.participant as participant
from submission_api.config import load_submission_config
from submission_api.data import open_compiled, images_to_tensor
from submission_api.sampling.meta_train import build_meta_generators
import submission_api.runner.supervisor, submission_api.runner.task_process
from submission_api.logger import Logger
heavy = {"scipy", "matplotlib", "rich", "jinja2", "typer", "httpx", "yaml"} | FRAMEWORKS
print(sorted(m for m in heavy if m in sys.modules))
"""


def test_the_participant_side_imports_only_numpy_and_torch():
    code = PARTICIPANT_SIDE.replace("FRAMEWORKS", repr(FRAMEWORKS))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_participant_install_can_run_and_zip_without_the_platform():
    code = ("import sys; import submission_api.runner.local, submission_api.submission_zip, "
            f"starting_kit.commands.data; print(sorted(m for m in {FRAMEWORKS!r} "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def _server_imports(folder: str) -> dict[str, set[str]]:
    """Dotted `server.…` modules each file of server/<folder> imports (absolute, at any depth)."""
    found: dict[str, set[str]] = {}
    for path in (ROOT / "server" / folder).glob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names if a.name.startswith("server.")}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                    and node.module.startswith("server."):
                names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        found[path.name] = names
    return found


def test_html_routes_live_in_web_and_json_routes_in_api():
    """Issue 35.4: server/web holds every HTML route and reaches into server/api for its
    injectables only (server/api/deps.py); server/api imports nothing of server/web and declares
    no hidden (HTML) route."""
    web = {f: sorted(n for n in names if n.startswith("server.api")
                     and not n.startswith("server.api.deps"))
           for f, names in _server_imports("web").items()}
    assert {f: n for f, n in web.items() if n} == {}
    api = {f: sorted(n for n in names if n.startswith("server.web"))
           for f, names in _server_imports("api").items()}
    assert {f: n for f, n in api.items() if n} == {}
    hidden = [p.name for p in (ROOT / "server" / "api").glob("*.py")
              if "include_in_schema=False" in p.read_text() or "HTMLResponse" in p.read_text()]
    assert hidden == []


def test_route_modules_define_no_pydantic_models():
    """Issue 35.4: the API's bodies live in server/schemas, not beside the routes."""
    models = {p.name: [n.name for n in ast.walk(ast.parse(p.read_text()))
                       if isinstance(n, ast.ClassDef)
                       and any(ast.unparse(b).endswith("BaseModel") for b in n.bases)]
              for p in (ROOT / "server" / "api").glob("*.py")}
    assert {f: m for f, m in models.items() if m} == {}


ROUTES_THAT_STILL_COMMIT: set[str] = set()
"""Issue 35.4: empty since the last routes' commits moved into their services (token_grants,
accounts, phase_actions, pools); a route that commits again fails the test below."""


def _commits(path: Path) -> int:
    return sum(1 for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
               and node.func.attr == "commit")


def test_route_handlers_never_commit():
    """docs/internals.md, "Commits": the service that performs a write commits the session it
    was given, or a `with db.session(write=True)` block commits on leaving; no route module in
    server/api or server/web calls .commit(). The allow-list only shrinks: a listed module that
    no longer commits must leave it."""
    committing = {f"{folder}/{p.name}" for folder in ("api", "web")
                  for p in (ROOT / "server" / folder).glob("*.py") if _commits(p)}
    assert committing - ROUTES_THAT_STILL_COMMIT == set()
    assert ROUTES_THAT_STILL_COMMIT - committing == set()


def test_one_upload_path_for_the_api_and_the_web_form():
    """Issue 35 (D5): both upload routes go through services/upload_flow.py's
    `receive_submission`; no route module streams, checks and registers an upload itself."""
    def names(path: Path) -> set[str]:
        return {n.id if isinstance(n, ast.Name) else n.attr
                for n in ast.walk(ast.parse(path.read_text()))
                if isinstance(n, (ast.Name, ast.Attribute))}
    routes = {p.name: names(p) for folder in ("api", "web")
              for p in (ROOT / "server" / folder).glob("*.py")}
    assert sorted(f for f, n in routes.items() if n & {"accept_submission", "store_method"}) == []
    assert sorted(f for f, n in routes.items() if "receive_submission" in n) == [
        "submissions.py", "submit_pages.py"]
