"""The HTTP side of the remote commands (`starting_kit.commands.remote`): talk to any MetaDL
Arena server (httpx only — this works from a participant's install, no FastAPI).

The server URL and token come from `--server/--token`, else ARENA_SERVER/ARENA_TOKEN, else the
credentials `arena login` stored in ~/.config/metadl-arena/credentials.json (mode 0600).
`ArenaClient` does the HTTP and turns every failure into a `RemoteError` whose message says what
happened and how to fix it (server down, bad token, quota refused with the server's message);
the commands only print. Tests drive `ArenaClient` directly with any httpx.Client.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import httpx
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn
from rich.text import Text

TERMINAL = ("finished", "failed", "timed_out", "cancelled")
console = Console(stderr=True)


class RemoteError(Exception):
    """A failed call, explained for a person; `problems` are a bundle's (line, where, what)."""

    def __init__(self, message: str, problems: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or []


def credentials_path() -> Path:
    return Path.home() / ".config" / "metadl-arena" / "credentials.json"


def save_credentials(server: str, token: str, path: Path | None = None) -> Path:
    """Write the credentials readable by their owner only (0600, folder 0700)."""
    path = path or credentials_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump({"server": server.rstrip("/"), "token": token}, out)
    os.chmod(path, 0o600)  # an existing file keeps its old mode through O_CREAT
    return path


def load_credentials(server: str | None, token: str | None) -> tuple[str, str]:
    stored: dict[str, str] = {}
    if credentials_path().is_file():
        stored = json.loads(credentials_path().read_text())
    server, token = server or stored.get("server"), token or stored.get("token")
    if not server or not token:
        raise RemoteError("no server or token; run `arena login --server URL --token TOKEN` "
                          "or pass --server and --token")
    return server, token


class _Counting:
    """A file whose reads advance a progress bar (httpx reads the upload in chunks)."""

    def __init__(self, handle: BinaryIO, advance: Callable[[int], None]) -> None:
        self._handle, self._advance = handle, advance

    def read(self, size: int = -1) -> bytes:
        chunk = self._handle.read(size)
        self._advance(len(chunk))
        return chunk

    def fileno(self) -> int:
        return self._handle.fileno()


class ArenaClient:
    """The public API of one server, with one bearer token."""

    def __init__(self, http: httpx.Client, token: str) -> None:
        self.http, self.headers = http, {"Authorization": f"Bearer {token}"}

    @classmethod
    def connect(cls, server: str, token: str, timeout_s: float = 60.0) -> ArenaClient:
        return cls(httpx.Client(base_url=server.rstrip("/"), timeout=timeout_s), token)

    def call(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self.http.request(method, url, headers=self.headers, **kwargs)
        except httpx.TransportError as exc:
            raise RemoteError(f"cannot reach the server at {self.http.base_url} ({exc}); is "
                              "it up, and is --server right?") from exc
        if response.status_code >= 400:
            raise RemoteError(explain(response), problems=_problems(response))
        return response

    def get(self, url: str, **kwargs: Any) -> Any:
        return self.call("GET", url, **kwargs).json()

    def get_all(self, url: str, max_pages: int = 1000, **kwargs: Any) -> list[Any]:
        """Every item of a paginated list, following its `Link: rel="next"` headers."""
        items: list[Any] = []
        for _ in range(max_pages):
            response = self.call("GET", url, **kwargs)
            items.extend(response.json())
            url = response.links.get("next", {}).get("url", "")
            if not url:
                break
            kwargs.pop("params", None)  # the next link carries them
        return items

    def post(self, url: str, **kwargs: Any) -> Any:
        return self.call("POST", url, **kwargs).json()

    def upload(self, url: str, path: Path, fields: dict[str, str], show: bool = True) -> Any:
        """POST a file as multipart 'file' with a progress bar."""
        with path.open("rb") as handle, _progress(path, show) as advance:
            files = {"file": (path.name, _Counting(handle, advance), "application/octet-stream")}
            return self.post(url, files=files, data=fields)


@contextmanager
def _progress(path: Path, show: bool) -> Iterator[Callable[[int], None]]:
    if not show:
        yield lambda _n: None
        return
    with Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                  TransferSpeedColumn(), console=console, transient=True) as bar:
        task = bar.add_task(f"uploading {path.name}", total=path.stat().st_size)
        yield lambda n: bar.advance(task, n)


def explain(response: httpx.Response) -> str:
    """The server's own message, with a hint for the common cases."""
    try:
        error = response.json().get("error", {})
    except ValueError:
        error = {}
    code, message = error.get("code", ""), error.get("message") or response.text[:300]
    if response.status_code == 401:
        server = str(response.request.url.copy_with(path="/", query=None)).rstrip("/")
        return (f"401 {code}: {server} refused the token (unknown, revoked or expired, or none "
                f"was sent). Log in again with a valid token from your organizers:\n"
                f"  arena login --server {server} --token YOUR_TOKEN\n"
                "(or pass --token / set ARENA_TOKEN for one command)")
    hint = {403: " — this needs another role or ownership; ask the organizers if it should "
                 "not", 429: " — wait, or submit a better one later (`arena phases` shows "
                 "your quota left)"}.get(response.status_code, "")
    if hint and ("ask " in message.lower() or "quota" in message.lower()):
        hint = ""  # the server's message already says what to do: say it once
    problems = [e for e in (error.get("details") or {}).get("errors", []) if isinstance(e, dict)]
    if problems:  # the message repeats them all on one line: list them once, one a line
        return "\n".join([f"{response.status_code} {code}: {len(problems)} problem(s)",
                          *(f"  line {e['line']}: {e['where']}: {e['message']}"
                            for e in problems)])
    return f"{response.status_code} {code}: {message}{hint}"


def _problems(response: httpx.Response) -> list[dict[str, Any]]:
    try:
        details = (response.json().get("error") or {}).get("details") or {}
    except (ValueError, AttributeError):
        return []
    return [e for e in details.get("errors", []) if isinstance(e, dict)]


def zip_if_folder(source: Path, workdir: Path) -> Path:
    """A folder becomes a checked, deterministic zip (as `arena zip` makes)."""
    if source.is_file():
        return source
    from submission_api.submission_zip import UnsafeZipError, build_submission_zip

    try:
        return build_submission_zip(source, workdir / f"{source.resolve().name}.zip")
    except UnsafeZipError as exc:
        raise RemoteError(f"refused before upload: {exc}") from exc


def submit(client: ArenaClient, source: Path, phase_id: int, *, note: str = "",
           league: str | None = None, show: bool = True, method: dict[str, str] | None = None,
           before_upload: Callable[[Path], None] | None = None) -> dict[str, Any]:
    """Upload a zip (or a folder, zipped first) to a phase; returns the submission.
    `before_upload` sees the zip about to be sent and may refuse it (raise RemoteError)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = zip_if_folder(source, Path(tmp))
        if before_upload is not None:
            before_upload(path)
        fields = {"note": note} | ({"league": league} if league else {}) | {
            k: v for k, v in (method or {}).items() if v}
        return client.upload(f"/api/v1/phases/{phase_id}/submissions", path, fields, show)


def follow(client: ArenaClient, submission_id: int, poll_s: float = 5.0,
           sleep: Callable[[float], None] = time.sleep,
           say: Callable[[str], None] = lambda m: console.print(Text(m)),
           clock: Callable[[], float] = time.monotonic,
           remind_s: float = 60.0) -> dict[str, Any]:
    """Poll a submission until it ends, saying each state change, and while a state lasts, how
    long it has lasted (every `remind_s`), so a long meta-training is not silence; a run queued
    again says why (a platform fault, retried and not charged); returns the last view."""
    last, since, said = None, clock(), clock()
    while True:
        view = client.get(f"/api/v1/submissions/{submission_id}")
        if view["state"] != last:
            where = f" (queue position {view['queue_position']})" if view.get(
                "queue_position") else ""
            retried = [r for r in view.get("runs") or []
                       if r.get("state") == "queued" and r.get("message")]
            why = f": {str(retried[0]['message']).split(chr(10))[0]}" if retried and last else ""
            say(f"submission {submission_id}: {view['state']}{where}{why}"
                f"{serving_words(client, view)}")
            last, since, said = view["state"], clock(), clock()
        elif clock() - said >= remind_s:
            where = f", queue position {view['queue_position']}" if view.get(
                "queue_position") else ""
            say(f"submission {submission_id}: still {view['state']} "
                f"({_minutes(clock() - since)}{where}{progress_words(view)})"
                f"{serving_words(client, view)}")
            said = clock()
        if view["state"] in TERMINAL:
            return view
        sleep(poll_s)


def serving_words(client: ArenaClient, view: dict[str, Any]) -> str:
    """`; no worker is serving this phase ...` while the submission waits in a phase whose
    organizers' worker pool has no live worker (issue 37): no start can be promised then."""
    if view.get("state") != "queued" or not view.get("phase_id"):
        return ""
    try:
        serving = client.get(f"/api/v1/phases/{view['phase_id']}").get("serving") or {}
    except RemoteError:
        return ""
    if not serving.get("message"):
        return ""
    return (f"; {serving['message']}: the organizers evaluate it on their own workers and none "
            "is connected, so it waits until one is")


def progress_words(view: dict[str, Any]) -> str:
    """`; meta-test 37 of 200 tasks` from the runs' last reported progress, or ``."""
    parts = []
    for run in view.get("runs") or []:
        progress = run.get("progress") or {}
        if run.get("state") != "running" or not progress.get("step"):
            continue
        step = "meta-training" if progress["step"] == "meta_fit" else "meta-test"
        if progress.get("tasks_total"):
            step += f" {progress.get('tasks_done') or 0} of {progress['tasks_total']} tasks"
        parts.append(step if len(view["runs"]) == 1 else f"run {run['index']}: {step}")
    return f"; {', '.join(parts)}" if parts else ""


def _minutes(seconds: float) -> str:
    minutes = int(seconds // 60)
    return f"{minutes} min" if minutes else f"{int(seconds)} s"


def bundle_request(client: ArenaClient, bundle: Path, cache: Path) -> dict[str, Any]:
    """The bundle text plus every local collection it names, compiled and registered.

    A bundle that is not even YAML is sent as it is: the server lists its problems with their
    lines. Dataset names missing from their local collection are refused here, before any
    dataset is compiled or uploaded, each with its line and the closest existing name."""
    import yaml

    from starting_kit.commands.bundle_client import check_local_datasets, register_collection
    from starting_kit.commands.kit_client import check_kit_paths

    text = bundle.read_text(encoding="utf-8")
    try:
        raw = yaml.safe_load(text) or {}
    except (yaml.YAMLError, ValueError):  # ValueError: an impossible date such as 2022-13-45
        raw = {}
    paths: dict[str, set[str]] = {}
    for phase in raw.get("phases") or [] if isinstance(raw, dict) else []:
        data = phase.get("data") if isinstance(phase, dict) else None
        if isinstance(data, dict) and data.get("path"):
            names = paths.setdefault(str(data["path"]), set())
            for role in ("meta_train", "meta_valid", "meta_test"):
                names |= {str(r).split("@")[0] for r in data.get(role) or [] if isinstance(r, str)}
    check_local_datasets(bundle, text, paths)
    check_kit_paths(bundle, text, raw)
    resolved = {}
    for rel, names in paths.items():
        folder = (bundle.parent / rel).resolve()
        console.print(Text(f"compiling and registering {folder}"))
        resolved[rel] = register_collection(client, folder, cache, names)
    return {"yaml": text, "resolved": resolved}


def print_board(board: dict[str, Any], stats: bool = False) -> None:
    """The board as a table; with `stats`, each entry's rank range and tied group too."""
    from rich.table import Table

    title = f"phase {board['phase_id']}" + (f" · league {board['league']}" if board["league"]
                                            else "")
    if board["hidden"] != "none":
        title += f" · hidden: {board['hidden']}"
    if stats and not board.get("statistics"):
        Console(stderr=True).print(
            f"statistics (rank ranges, tied groups) are off for phase {board['phase_id']} now: "
            "its organizers show them during the phase, after it closes, or never (the "
            "bundle's leaderboard.statistics); the plain board follows", highlight=False)
    stats = stats and bool(board.get("statistics"))
    table = Table(title=title)
    for column in ("#", *(("rank range", "group") if stats else ()), "competitor", "method",
                   "score", "ci95", *board["datasets"]):
        table.add_column(column)
    for e in board["entries"]:
        per = e.get("per_dataset") or {}
        extra = ([f"{e['rank_low']}–{e['rank_high']}" if e.get("rank_low") else None,
                  e.get("tied_group")] if stats else [])
        who = f"{e['team']} (team)" if e.get("team") else e["username"]
        cells = [e["rank"], *extra, who + (" (baseline)" if e["is_baseline"] else ""),
                 e.get("method") or None, e["score"], e["ci95"],
                 *[per.get(d) for d in board["datasets"]]]
        table.add_row(*["-" if c is None else f"{c:.4f}" if isinstance(c, float) else str(c)
                        for c in cells])
    Console().print(table)
    if stats:
        Console().print("rank range: ranks in 95% of bootstrap resamples of the test tasks "
                        "(of the ranked quantity, on these datasets); group 1: the leader and "
                        "every entry a paired test (Holm-corrected, 5%) cannot tell apart from "
                        "it; each next group is led by the best entry not yet grouped")


def comparison_words(c: dict[str, Any]) -> str:
    """`arena compare`'s answer, e.g. "A − B = +0.012 (−0.004 … +0.028), not significant"."""
    verdict = "significant" if c["significant"] else "not significant"
    metric = c.get("metric") or "score"
    words = (f"{c['a']} − {c['b']} = {c['mean']:+.4f} ({c['t_low']:+.4f} … {c['t_high']:+.4f}) "
             f"in {metric}, {verdict} (paired t-test over {c['n_tasks']} shared tasks, each "
             f"dataset weighing as in the score, p = {c['p_value']:.3g}; Wilcoxon signed-rank "
             f"p = {c['wilcoxon_p']:.3g}); the interval is of the expected difference on these "
             f"{c['n_datasets']} datasets over fresh test tasks")
    if c.get("bootstrap_low") is not None:
        words += (f"\nbootstrap over {c['n_datasets']} datasets, 95%: "
                  f"{c['bootstrap_low']:+.4f} … {c['bootstrap_high']:+.4f} (would it hold on "
                  "other datasets like these)")
    elif c.get("dataset_note"):
        words += f"\n{c['dataset_note']}"
    return words
