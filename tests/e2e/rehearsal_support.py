"""Tools for the competition dress rehearsal (test_competition_rehearsal.py): the platform run
as an operator runs it (`arena serve` on a socket), a browser-less web visitor that posts the
real forms with their CSRF tokens, the `arena` command as a subprocess with a home of its own,
the organizer's bundle and data (one dataset of 100+ MB), a 40+ MB submission, and CPU burners
that load the machine while the big uploads go. Importable by name (tests/e2e has no
__init__)."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import httpx
import numpy as np
from PIL import Image
from platform_support import TLS, Platform, make_model_zip, wait_until

from starting_kit.sample_data import generate_collection

ARENA = Path(sys.executable).with_name("arena")
BIG_DATASET = "archive"
BIG_CLASSES, BIG_IMAGES = 20, 110  # 2,200 images x 49,152 bytes compiled: 108 MB
WEIGHTS_BYTES = 41 * 1024**2


class RehearsalPlatform(Platform):
    """The e2e platform, but its server is `arena serve` (the operator's command, with its
    HTTP bounds) and its public URL is its real address (invite links point at it)."""

    def server_env(self) -> dict[str, str]:
        # Everyone signs up from 127.0.0.1: a workshop behind one address, as an operator
        # would allow it (the default is 5 accounts per address per hour).
        return {**super().server_env(), "ARENA_PUBLIC_BASE_URL": self.base_url,
                "ARENA_SIGNUP": "open", "ARENA_SIGNUP_PER_ADDRESS_PER_HOUR": "12"}

    def start_server(self) -> None:
        port = self.base_url.rsplit(":", 1)[1]
        log = (self.root / "server.log").open("ab")
        self.server = subprocess.Popen([str(ARENA), "serve", "--host", "127.0.0.1",
                                        "--port", port], env=self.server_env(),
                                       stdout=log, stderr=log)
        wait_until(self._server_answers, 90, "`arena serve` to answer")


# --- the web, as a browser speaks it ---------------------------------------------------------

@dataclass
class Form:
    action: str
    method: str
    fields: dict[str, str]
    checkboxes: dict[str, str]


class _Forms(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.forms: list[Form] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append(Form(a.get("action", ""), a.get("method", "get").lower(), {}, {}))
        elif tag in ("input", "textarea", "select") and self.forms and a.get("name"):
            if a.get("type") == "checkbox":
                self.forms[-1].checkboxes[a["name"]] = a.get("value", "on")
            elif a.get("type") != "file":
                self.forms[-1].fields[a["name"]] = a.get("value", "")


def forms_of(page: str) -> list[Form]:
    parser = _Forms()
    parser.feed(page)
    return parser.forms


def text_of(page: str) -> str:
    """The visible words of a page (tags dropped, entities decoded, spaces squeezed)."""
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


@dataclass
class Visitor:
    """One person's browser: cookies kept, redirects followed by hand (each one checked)."""

    base_url: str
    name: str = "anonymous"
    password: str = ""
    http: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        self.http = httpx.Client(base_url=self.base_url, timeout=180, follow_redirects=True,
                                 verify=TLS)

    def get(self, path: str) -> httpx.Response:
        return self.http.get(path)

    def form(self, page_path: str, action: str) -> Form:
        page = self.get(page_path)
        assert page.status_code == 200, f"{self.name}: GET {page_path}: {page.status_code}"
        found = [f for f in forms_of(page.text) if f.action == action]
        assert found, (f"{self.name}: {page_path} has no form posting to {action}; its forms: "
                       f"{[f.action for f in forms_of(page.text)]}")
        return found[0]

    def submit_form(self, page_path: str, action: str, check: tuple[str, ...] = (),
                    files: dict | None = None, follow: bool = True,
                    **values: str) -> httpx.Response:
        """Fill the form of `page_path` that posts to `action` as a person would (hidden
        fields, the CSRF token among them, kept; `check` ticks checkboxes) and send it."""
        form = self.form(page_path, action)
        data = {**form.fields, **{k: form.checkboxes[k] for k in check}, **values}
        return self.http.post(action, data=data, files=files, follow_redirects=follow)

    def sign_up(self, email: str) -> httpx.Response:
        return self.submit_form("/signup", "/signup", username=self.name, email=email,
                                password=self.password)

    def log_in(self, token: str | None = None) -> httpx.Response:
        """The login form (an API token, or the password); answers its 303."""
        if token:
            return self.submit_form("/login", "/login", token=token, follow=False)
        form = [f for f in forms_of(self.get("/login").text) if "username" in f.fields][0]
        return self.http.post("/login", data={**form.fields, "username": self.name,
                                              "password": self.password},
                              follow_redirects=False)

    def close(self) -> None:
        self.http.close()


# --- the command line ------------------------------------------------------------------------

def arena(home: Path, *args: str, timeout_s: float = 300) -> subprocess.CompletedProcess:
    """`arena ARGS` in a home of its own (its saved credentials), as a participant runs it."""
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")} | {
        "HOME": str(home), "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run([str(ARENA), *args], env=env, capture_output=True, text=True,
                          timeout=timeout_s)


def ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, f"{result.args}: {result.stdout}\n{result.stderr}"
    return result.stdout + result.stderr  # rich's console writes to stderr


# --- what the organizer and the participants bring ---------------------------------------------

def write_big_dataset(collection: Path) -> Path:
    """A Meta-Album dataset whose compiled entry passes 100 MB: each class a colour, noise
    on top (a centroid model does better than chance; JPEG keeps the folder small)."""
    root = collection / BIG_DATASET
    (root / "images").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(32)
    rows = ["FILE_NAME,CATEGORY"]
    for c in range(BIG_CLASSES):
        colour = rng.uniform(0, 255, 3)
        for j in range(BIG_IMAGES):
            pixels = np.clip(colour + rng.normal(0, 60, (128, 128, 3)), 0, 255).astype(np.uint8)
            name = f"a_{c:02d}_{j:03d}.jpg"
            Image.fromarray(pixels).save(root / "images" / name, quality=85)
            rows.append(f"{name},class_{c:02d}")
    (root / "labels.csv").write_text("\n".join(rows) + "\n")
    (root / "info.json").write_text(json.dumps({
        "dataset_name": BIG_DATASET, "image_column_name": "FILE_NAME",
        "category_column_name": "CATEGORY", "has_super_categories": False}))
    return root


def model_folder(folder: Path, weights: int = 0, flavour: str = "") -> Path:
    """A nearest-centroid submission folder (quick in the sandbox), with `weights` random
    bytes in a file the model never reads (incompressible: the zip is as big)."""
    make_model_zip(folder, top=f"FLAVOUR = {flavour!r}").unlink()
    if weights:
        with (folder / "weights.bin").open("wb") as out:
            for _ in range(0, weights, 2**20):
                out.write(os.urandom(2**20))
    return folder


BUNDLE = """\
slug: rehearsal-cup
title: Rehearsal Cup
description: A whole competition, run as people run one.
participation: open
terms: |
  You will not share the **test data**.
pages:
  - title: Rules
    content: One team, one final entry. Fact sheets are required of finalists.
tabs:
  overview: Meta-learn on some domains, be tested on others.
  data: Generated Meta-Album domains; the final's test domain is a big one.
  evaluation: Normalized balanced accuracy; the final is secret until published.
teams: {{allowed: true, max_size: 3}}
kit: {{files: [example], sample_data: sample}}
phases:
  - name: feedback
    description: Feedback on hidden test domains.
    data: {{collection: rehearsal, path: data, meta_train: [stripes, blobs], meta_test: [spectra]}}
    protocol: {{name: cross-domain, tasks_per_dataset: 2}}
    time_limit: 2m
    resources: {{cpus: 1, memory: 2G}}
    image: metadl-arena/sandbox:cpu
    quotas: {{per_day: 5, in_flight: 2}}
    leaderboard: {{ranking: score, rule: best, columns: [score, ci95, per_dataset]}}
  - name: final
    description: The teams' chosen entries on a new, secret domain.
    carry_from: feedback
    data: {{collection: rehearsal, path: data, meta_train: [stripes, blobs], meta_test: [{final}]}}
    protocol: {{name: cross-domain, tasks_per_dataset: 2}}
    time_limit: 2m
    resources: {{cpus: 1, memory: 2G}}
    image: metadl-arena/sandbox:cpu
    hide_logs: true
    leaderboard: {{ranking: score, rule: best, hidden: scores, test_data: secret}}
    factsheet:
      - {{key: approach, label: "Describe your method", kind: text, required: true}}
      - {{key: pretrained, label: "Pre-trained weights?", kind: choice, choices: ["yes", "no"]}}
"""


def write_bundle(folder: Path, final_test: str) -> Path:
    """The bundle, its example submission and sample data beside it (the kit it names)."""
    if not (folder / "example").is_dir():
        model_folder(folder / "example", flavour="example")
        generate_collection(folder / "sample", n_classes=5, n_images=21,
                            domains=["stripes", "spectra"])
    path = folder / "competition.yaml"
    path.write_text(BUNDLE.format(final=final_test))
    return path


@contextmanager
def cpu_burners(count: int = 2) -> Iterator[None]:
    """`count` processes spinning on the CPU (a loaded host) for the duration."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
               for _ in range(count)]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait(timeout=10)


# --- the browser -------------------------------------------------------------------------------

CHROMIUM = Path(os.environ.get("ARENA_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
WIDTHS = (1400, 400)


@contextmanager
def chromium() -> Iterator[object]:
    """Headless Chromium through Playwright, as tests/browser drive it; a missing one is a
    skip locally and a failure in CI (require_service)."""
    from arena_test_services import require_service

    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        require_service("playwright", str(exc))
    if not CHROMIUM.exists():
        require_service("Chromium", f"{CHROMIUM} does not exist (set ARENA_CHROMIUM)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def screenshots(page, folder: Path, name: str, must_show: tuple[str, ...]) -> list[Path]:  # noqa: ANN001
    """Full-page screenshots at 1400 and 400 px; each a real PNG, and the page's key words in
    its DOM at both widths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        path = folder / f"{name}-{width}px.png"
        page.screenshot(path=str(path), full_page=True)
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000, path
        body = page.inner_text("body")
        missing = [w for w in must_show if w not in body]
        assert not missing, f"{name} at {width} px lacks {missing}: {body[:600]}"
        paths.append(path)
    return paths


def on_screen_at_400(page, selector: str) -> dict:  # noqa: ANN001
    """The first element matching `selector`, scrolled to as a person would, lies within the
    400 px viewport; returns its box."""
    page.set_viewport_size({"width": 400, "height": 900})
    element = page.locator(selector).first
    element.scroll_into_view_if_needed()
    box = element.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 400, (selector, box)
    return box
