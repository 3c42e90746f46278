"""The server's one typed settings class; every environment variable is read here (prefix ARENA_).

Nothing else reads `os.environ`: the composition root (`create_app`) receives a Settings object,
and tests build one directly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Deployment settings. Defaults give a working single-machine (SQLite) server."""

    model_config = SettingsConfigDict(env_prefix="ARENA_", env_file=None, extra="ignore")

    data_dir: Path = Path("arena-data")
    database_url: str = ""  # "" -> sqlite:///<data_dir>/arena.db
    storage_dir: Path | None = None  # None -> <data_dir>/storage
    broker_url: str = "redis://127.0.0.1:6379/0"
    default_queue: str = "arena"
    secret_key: str = Field(default="change-me-in-production", min_length=8)
    test_seed_secret: str = ""  # "" -> secret_key; the test tasks' seeds derive from it
    public_base_url: str = "http://127.0.0.1:8000"
    admin_bootstrap_token: str | None = None
    auto_migrate: bool = True

    max_upload_bytes: int = 200 * 1024**2
    max_uncompressed_bytes: int = 2 * 1024**3
    max_zip_files: int = 2_000
    max_dataset_upload_bytes: int = 20 * 1024**3
    log_cap_bytes: int = 1024**2

    # Database connections: SQLAlchemy's pool per server process (SQLite and Postgres alike).
    db_pool_size: int = Field(default=10, ge=1)
    db_max_overflow: int = Field(default=20, ge=0)
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
        """Derive the database URL and storage folder from data_dir when they are not given."""
        if not self.database_url:
            self.database_url = f"sqlite:///{(self.data_dir / 'arena.db').as_posix()}"
        if self.storage_dir is None:
            self.storage_dir = self.data_dir / "storage"
        return self

    @property
    def seed_secret(self) -> str:
        """The secret test-task seeds derive from (`services.seeds`)."""
        return self.test_seed_secret or self.secret_key

    @property
    def storage(self) -> Path:
        """The storage folder (always set after validation)."""
        assert self.storage_dir is not None
        return self.storage_dir
