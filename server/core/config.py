"""The server's one typed settings class; every environment variable is read here (prefix ARENA_).

Nothing else reads `os.environ`: the composition root (`create_app`) receives a Settings object,
and tests build one directly.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from server.core.db import PoolSize

PLACEHOLDER_SECRET = "change-me-in-production"
MIN_SECRET_BYTES = 32
DEV_TEST_SEED_SECRET = "arena-dev-only-test-seed-secret-not-for-deployments"
POOL_HEADROOM = 8
"""Connections beyond the admitted requests' (upload registrations, reconciler, lifespan)."""


def default_request_concurrency() -> int:
    """Requests admitted at once unless set: 4 per CPU, at least 8, at most 64."""
    return max(8, min(64, 4 * (os.cpu_count() or 2)))


class InsecureSecretsError(ValueError):
    """The server was started with a placeholder, missing or short secret."""


class Settings(BaseSettings):
    """Deployment settings. Defaults give a working single-machine (SQLite) server."""

    model_config = SettingsConfigDict(env_prefix="ARENA_", env_file=None, extra="ignore")

    data_dir: Path = Path("arena-data")
    database_url: str = ""  # "" -> sqlite:///<data_dir>/arena.db
    storage_dir: Path | None = None  # None -> <data_dir>/storage
    broker_url: str = "redis://127.0.0.1:6379/0"
    default_queue: str = "arena"
    # Signs CSRF tokens; rotating it only invalidates the forms open at that moment.
    secret_key: str = Field(default=PLACEHOLDER_SECRET, min_length=8)
    # The test tasks' seeds derive from it (services/seeds.py): its own setting, never derived
    # from secret_key. Changing it changes every phase's test tasks unless the phase is pinned
    # to its old value in test_seed_secret_by_phase (docs/internals.md, "Rotating secrets").
    test_seed_secret: str = ""
    test_seed_secret_by_phase: dict[int, str] = Field(default_factory=dict)
    # Accept the placeholder or short secrets (a laptop, never a deployment): `arena serve --dev`.
    insecure_dev_secrets: bool = False
    # Where participants reach this server (ARENA_PUBLIC_URL, e.g. https://arena.example.org):
    # the Get-started `arena login` line and kit links are built on it; unset, on the address
    # each request came to (what the participant's browser used). Set it behind a proxy that
    # rewrites the host.
    public_url: str = ""
    # The older setting (ARENA_PUBLIC_BASE_URL) mailed links and team invites are built on;
    # it takes ARENA_PUBLIC_URL's value when only that is set.
    public_base_url: str = "http://127.0.0.1:8000"
    admin_bootstrap_token: str | None = None
    admin_bootstrap_username: str = "admin"  # refused at start-up if a non-admin holds it
    auto_migrate: bool = True

    max_upload_bytes: int = 200 * 1024**2
    max_uncompressed_bytes: int = 2 * 1024**3
    max_zip_files: int = 2_000
    max_dataset_upload_bytes: int = 20 * 1024**3
    log_cap_bytes: int = 1024**2
    max_header_bytes: int = Field(default=64 * 1024, ge=4096)
    """A request's line and headers (server/core/http_bounds.py): beyond, 431."""
    max_bundle_bytes: int = Field(default=1024**2, ge=1024)
    """A competition bundle's body (YAML or JSON): beyond, 413 `bundle.too_large`."""
    max_json_body_bytes: int = Field(default=1024**2, ge=1024)
    """Any other request body that is not a streamed multipart upload (JSON API calls, forms):
    beyond, 413 `request.too_large` (server/core/body_bounds.py)."""
    max_internal_body_bytes: int = Field(default=64 * 1024**2, ge=1024)
    """A worker's call to the internal API (a finish: up to 100,000 per-task results and the
    log): beyond, 413."""

    # Requests the app works on at once (server/core/admission.py); the rest wait their turn.
    request_concurrency: int = Field(default_factory=default_request_concurrency,
                                     ge=1, le=1000)
    """4 per CPU (8 to 64): a request's work is mostly Python under one GIL; on 2 cores at load
    27, 32 at once left the event loop too little of it to shed the excess of 1,000 readers (40
    client time-outs), 8 at once none (issue 38.5, docs/performance.md)."""
    request_max_waiting: int = Field(default=256, ge=0)
    """Requests that may wait for a slot; one more is answered 503 with Retry-After at once."""
    request_max_wait_s: float = Field(default=20.0, gt=0)
    """A waiting request not admitted within this is answered 503 (a client's 60 s time-out
    never runs out on a queue)."""
    internal_request_concurrency: int = Field(default=4, ge=1, le=100)
    """The workers' own lane (claims, heartbeats, finishes): never shed, never behind readers."""
    # Database connections: SQLAlchemy's pool per server process (SQLite and Postgres alike).
    # Unset: sized from request_concurrency (see `db_pool`), so the pool cannot run dry.
    db_pool_size: int | None = Field(default=None, ge=1)
    db_max_overflow: int | None = Field(default=None, ge=0)
    db_pool_timeout_s: float = Field(default=30.0, gt=0)
    # Uploads streaming at once (services/upload_gate.py), and how long one may send nothing.
    max_concurrent_uploads: int = Field(default=32, ge=1)
    max_uploads_per_user: int = Field(default=2, ge=1)
    upload_retry_after_s: int = Field(default=30, ge=1)
    upload_idle_timeout_s: float = Field(default=60.0, gt=0)

    lease_seconds: int = 120
    max_platform_failures: int = 3
    release_backoff_s: float = Field(default=15.0, ge=0)
    """Pause before a run released for a platform fault is offered again; doubled per fault."""
    release_backoff_max_s: float = Field(default=300.0, ge=0)
    requeue_after_s: int = 900  # a queued run unclaimed this long was lost (uninspectable broker)
    lost_after_s: int = 60  # a queued run this old, missing from the broker twice, was lost
    reconcile_interval_s: float = 30.0  # 0 disables the in-process reconciler
    session_cookie_secure: bool = False

    # Accounts people make themselves (server/services/signup.py): who may sign up.
    signup: Literal["open", "invite", "domains", "off"] = "open"
    signup_invite_code: str = ""  # signup="invite": the code a newcomer must give
    signup_email_domains: list[str] = Field(default_factory=list)  # signup="domains"
    signup_per_address_per_hour: int = Field(default=10, ge=0)  # accounts per address; 0: any
    login_attempts_per_window: int = Field(default=10, ge=1)
    login_window_s: int = Field(default=900, ge=1)
    password_reset_ttl_s: int = Field(default=24 * 3600, ge=60)
    # SMTP for password-reset mail (services/mailer.py); "" = no mail, organizers issue links.
    smtp_host: str = ""
    smtp_port: int = 25
    smtp_from: str = "arena@localhost"
    smtp_user: str = ""
    smtp_password: str = ""
    smtp_starttls: bool = False

    @model_validator(mode="after")
    def _fill_paths(self) -> Settings:
        """Derive the database URL and storage folder from data_dir when they are not given
        (and the older public_base_url from public_url)."""
        if self.public_url and "public_base_url" not in self.model_fields_set:
            self.public_base_url = self.public_url
        if not self.database_url:
            self.database_url = f"sqlite:///{(self.data_dir / 'arena.db').as_posix()}"
        if self.storage_dir is None:
            self.storage_dir = self.data_dir / "storage"
        return self

    def db_pool(self) -> PoolSize:
        """The pool: given sizes, else two connections per admitted request (a read and a
        write session) plus headroom for uploads registering, the reconciler and start-up."""
        need = 2 * (self.request_concurrency + self.internal_request_concurrency) + POOL_HEADROOM
        size = self.db_pool_size if self.db_pool_size is not None else min(need, 20)
        overflow = (self.db_max_overflow if self.db_max_overflow is not None
                    else max(need - size, 0))
        return PoolSize(size=size, max_overflow=overflow, timeout_s=self.db_pool_timeout_s)

    def public_url_for(self, request_base_url: str) -> str:
        """The URL participants reach this server at: `public_url` when set, else the base
        URL of the request being answered (issue 32.4: it was 127.0.0.1:8000 everywhere), unless
        the older public_base_url was set. Only for links shown to the requester: a mailed link
        uses the configured URL alone (a forged Host header must not reach someone's inbox)."""
        configured = self.public_url or (self.public_base_url
                                         if "public_base_url" in self.model_fields_set else "")
        return (configured or request_base_url).rstrip("/")

    @property
    def seed_secret(self) -> str:
        """The secret test-task seeds derive from (`services.seeds`); with the development
        flag and none set, a fixed development value (tasks then are public)."""
        if not self.test_seed_secret and self.insecure_dev_secrets:
            return DEV_TEST_SEED_SECRET
        return self.test_seed_secret

    def seed_secret_for(self, phase_id: int) -> str:
        """The test-seed secret of one phase: its pinned value while a rotation is under way."""
        return self.test_seed_secret_by_phase.get(int(phase_id)) or self.seed_secret

    def secret_problems(self) -> list[str]:
        """What is wrong with the secrets, in words (empty when they are fine)."""
        problems = []
        for name, value in (("ARENA_SECRET_KEY", self.secret_key),
                            ("ARENA_TEST_SEED_SECRET", self.test_seed_secret),
                            *((f"ARENA_TEST_SEED_SECRET_BY_PHASE[{k}]", v)
                              for k, v in self.test_seed_secret_by_phase.items())):
            if not value:
                problems.append(f"{name} is not set")
            elif value == PLACEHOLDER_SECRET:
                problems.append(f"{name} is the placeholder {PLACEHOLDER_SECRET!r}")
            elif len(value.encode()) < MIN_SECRET_BYTES:
                problems.append(f"{name} has {len(value.encode())} bytes; expected at least "
                                f"{MIN_SECRET_BYTES}")
        if self.test_seed_secret and self.test_seed_secret == self.secret_key:
            problems.append("ARENA_TEST_SEED_SECRET equals ARENA_SECRET_KEY; use two secrets")
        return problems

    def check_secrets(self) -> None:
        """Raise InsecureSecretsError unless the secrets are fit for a deployment (or the
        development flag accepts them)."""
        problems = self.secret_problems()
        if problems and not self.insecure_dev_secrets:
            raise InsecureSecretsError(
                "refusing to start: " + "; ".join(problems) + ". Anyone could recompute the "
                "test tasks from a published bundle, or forge forms. Fix: set each to a random "
                "value, e.g. `export ARENA_SECRET_KEY=$(openssl rand -hex 32) "
                "ARENA_TEST_SEED_SECRET=$(openssl rand -hex 32)`; on a laptop only, "
                "`arena serve --dev` (ARENA_INSECURE_DEV_SECRETS=1) accepts them.")

    @property
    def storage(self) -> Path:
        """The storage folder (always set after validation)."""
        assert self.storage_dir is not None
        return self.storage_dir
