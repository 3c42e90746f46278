"""What a sandboxed run is allowed, and the exact container settings that enforce it.

`SandboxLimits` (stored with a phase) and `SandboxSpec` (one run's image, command and folders) are
frozen, validated values. `build_container_kwargs` turns them into the keyword arguments of
`docker.APIClient.create_container`-level settings, as a pure function, so that every flag can be
checked by a unit test without a Docker engine. Nothing else in the worker chooses a limit.

Security choices worth knowing:
- Only the `submission_api` package is mounted (at /opt/arena/submission_api), never the whole
  project folder: that one may hold caches, answers of other runs, or configuration.
- The environment is an allowlist: the host's variables never reach the container, and a spec may
  only add variables named in `ALLOWED_ENV` or starting with `ARENA_` (secret-like names refused).
- The meta-test container's seccomp profile is ours (`worker/sandbox_seccomp.py`): Docker's
  default rules plus the namespace and tmpfs setup of each test task, argument-filtered.
- /tmp is a size-bounded tmpfs *with* exec: torch.compile / Triton write shared objects there and
  dlopen them; noexec would buy little, since participant code already runs arbitrary Python.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from docker.types import DeviceRequest, LogConfig, Mount, Ulimit

from submission_api.contract.resources import (
    DEFAULT_RESOURCES,
    DEFAULT_TIME_LIMIT_S,
    RESOURCE_BOUNDS,
    RunResources,
)
from worker import sandbox_seccomp

SANDBOX_UID = 1000
SANDBOX_GID = 1000
CODE_TARGET = "/opt/arena"
MOUNT_TARGETS = {"submission": "/submission", "bundle": "/bundle", "output": "/output"}
PRIVATE_COPY_TARGET = "/run/arena-copy"
"""The meta-test container's tmpfs for the run's private copy of the submission and the learner
(`runner/private_copy.py`): its pages count in the container's memory limit."""
ALLOWED_ENV = frozenset({
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
    "PYTHONHASHSEED", "PYTHONFAULTHANDLER", "TZ", "LC_ALL", "CUBLAS_WORKSPACE_CONFIG",
    "GLIBC_TUNABLES",  # runner/heap.py: the platform's own huge-page setting
})
ENV_PREFIX = "ARENA_"
SECRET_WORDS = ("SECRET", "TOKEN", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL", "AUTH")
# Labels let an operator (or a reaper) find containers the driver could not remove.
CONTAINER_LABELS = {"org.metadl-arena.role": "sandbox"}
NOFILE_LIMIT = 4096
CPUSET = re.compile(r"\d+(-\d+)?(,\d+(-\d+)?)*")


@dataclass(frozen=True)
class SandboxLimits:
    """Every resource bound of one sandboxed run; validated on construction.

    `gpus` holds device ids (index or UUID strings as `nvidia-smi` shows them); empty means no GPU.
    `wall_time_s` is the charged wall clock, which stops while the host starves the container
    (`worker/sandbox_clock.py`); `cpu_time_s` bounds its CPU time (None: none) and `backstop_s`
    its plain wall clock (None: `wall_time_s`), a kill there being the host's doing (issue 38.3).
    A later stage's backstop may be shorter than its `wall_time_s`: an earlier stage's wait for
    a core spent the plain clock but not the charged one, so the backstop ends it, the host's
    fault (the worker's settings keep the factor itself >= 1).
    `cpuset_cpus` pins it to host cores ("2,3"; None: any).
    `log_cap_bytes` bounds each of stdout and stderr as kept by the worker. The phase's bounds
    (memory, cpus, pids, /dev/shm, /tmp, output) take their defaults and ranges from the run
    contract (`submission_api.contract.resources`).
    """

    memory_mb: int = DEFAULT_RESOURCES.memory_mb
    cpus: float = DEFAULT_RESOURCES.cpus
    pids: int = DEFAULT_RESOURCES.pids
    shm_mb: int = DEFAULT_RESOURCES.shm_mb
    tmp_mb: int = DEFAULT_RESOURCES.tmp_mb
    output_mb: int = DEFAULT_RESOURCES.output_mb
    wall_time_s: float = float(DEFAULT_TIME_LIMIT_S)
    log_cap_bytes: int = 1_000_000
    gpus: tuple[str, ...] = ()
    network: bool = False
    cpu_time_s: float | None = None
    backstop_s: float | None = None
    cpuset_cpus: str | None = None

    def __post_init__(self) -> None:
        for name in ("cpus", "memory_mb", *PHASE_BOUNDS):
            try:
                RESOURCE_BOUNDS[name].check(name, getattr(self, name))
            except ValueError as error:
                raise ValueError(f"SandboxLimits: {error}") from None
        value = self.log_cap_bytes
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"SandboxLimits.log_cap_bytes={value!r}: expected an integer >= 0")
        for name in ("wall_time_s", "cpu_time_s", "backstop_s"):
            value = getattr(self, name)
            if value is None and name != "wall_time_s":
                continue
            if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"SandboxLimits.{name}={value!r}: expected a number > 0; "
                                 "fix the phase's limits")
        if isinstance(self.gpus, str) or not all(isinstance(g, str | int) for g in self.gpus):
            raise ValueError(f"SandboxLimits.gpus={self.gpus!r}: expected a tuple of device ids "
                             "such as ('0',) or () for no GPU")
        object.__setattr__(self, "gpus", tuple(str(g) for g in self.gpus))
        if self.cpuset_cpus is not None and not CPUSET.fullmatch(self.cpuset_cpus):
            raise ValueError(f"SandboxLimits.cpuset_cpus={self.cpuset_cpus!r}: expected host "
                             "cores such as '0,1' or '2-3'")
        if self.network:
            raise ValueError("SandboxLimits.network=True: sandboxed runs never get a network; "
                             "ship what the submission needs inside the zip")


PHASE_BOUNDS = ("pids", "shm_mb", "tmp_mb", "output_mb")
"""Bounds a phase sets besides cpus and memory (its `resources`), by their SandboxLimits names."""


def build_limits(resources: RunResources, **fixed: Any) -> SandboxLimits:
    """The limits of a run of a phase: cpus, memory and `PHASE_BOUNDS` from the phase's
    `resources`, the rest (wall time, GPUs, log cap) as given.

    Raises:
        ValueError: a bound out of range (SandboxLimits validates every one).
    """
    from_phase = {name: getattr(resources, name) for name in ("cpus", "memory_mb", *PHASE_BOUNDS)}
    return SandboxLimits(**{**from_phase, **fixed})


@dataclass(frozen=True)
class SandboxSpec:
    """One run's image, command and folders (host paths); validated on construction.

    `code_dir` is the host folder of the `submission_api` package, mounted read-only at
    /opt/arena/submission_api with PYTHONPATH=/opt/arena. `output_dir` is the one writable folder.
    `bundle_dir` is None for the meta-test stage, which sees no bundle; `read_only_mounts` adds
    (host folder, container path) pairs, all read-only (the learner, the task channel).
    """

    image: str
    command: tuple[str, ...]
    submission_dir: Path
    bundle_dir: Path | None
    output_dir: Path
    code_dir: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/submission"
    name: str | None = None
    read_only_mounts: tuple[tuple[Path, str], ...] = ()
    output_read_only: bool = False
    """The meta-test stage: /output stays mounted (the driver's bound and copy-out need it) but
    read-only, so no test task can leave a file or an xattr on its root for the next."""
    private_copy: bool = False
    """The meta-test stage: a tmpfs at PRIVATE_COPY_TARGET (as large as the memory limit, and
    charged to it) where the supervisor copies the submission and the learner before the first
    test task, so that no task can change which of their pages are resident."""
    task_namespaces: bool = False
    """The meta-test stage: the container's seccomp profile lets the supervisor give every test
    task namespaces and fresh tmpfs mounts of its own (worker/sandbox_seccomp.py). False: Docker's
    default profile (meta-train, where participant code runs from the start)."""

    def __post_init__(self) -> None:
        if not self.image:
            raise ValueError("SandboxSpec.image is empty; expected e.g. 'metadl-arena/sandbox:cpu'")
        # A plain string would be split by no shell here: refuse it rather than guess.
        command = () if isinstance(self.command, str) else tuple(self.command)
        if not command or not command[0] or not all(isinstance(p, str) for p in command):
            raise ValueError(f"SandboxSpec.command={self.command!r}: expected a non-empty list of "
                             "strings, e.g. ['python3', '-m', 'submission_api.runner.participant']")
        object.__setattr__(self, "command", command)
        for name in ("submission_dir", "bundle_dir", "output_dir", "code_dir"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, Path(value).resolve())
        check_env(self.env)
        object.__setattr__(self, "env", dict(self.env))
        taken = set(MOUNT_TARGETS.values()) | {CODE_TARGET}
        for _, target in self.read_only_mounts:
            if not target.startswith("/") or any(target == t or target.startswith(f"{t}/")
                                                 for t in taken):
                raise ValueError(f"SandboxSpec.read_only_mounts target {target!r}: expected an "
                                 f"absolute path outside {sorted(taken)}")
        object.__setattr__(self, "read_only_mounts",
                           tuple((Path(h).resolve(), t) for h, t in self.read_only_mounts))


def check_env(env: dict[str, str]) -> None:
    """Raise ValueError unless every variable is allowlisted and not secret-like."""
    for key, value in env.items():
        allowed = key in ALLOWED_ENV or key.startswith(ENV_PREFIX)
        secret_like = any(word in key.upper() for word in SECRET_WORDS)
        if not allowed or secret_like or not isinstance(value, str):
            raise ValueError(
                f"sandbox environment variable {key!r}={type(value).__name__} is not allowed: "
                f"expected a str value and a name in {sorted(ALLOWED_ENV)} or starting with "
                f"{ENV_PREFIX!r} and not naming a secret; pass data through the bundle instead")


def default_code_dir() -> Path:
    """The host folder of the installed `submission_api` package."""
    import submission_api

    return Path(submission_api.__file__).resolve().parent


def build_mounts(spec: SandboxSpec, output_source: Path | None = None) -> list[Mount]:
    """Bind mounts: inputs and code read-only, only the output folder writable."""
    code_dir = spec.code_dir or default_code_dir()
    output = output_source or spec.output_dir
    mounts = [
        Mount(MOUNT_TARGETS["submission"], str(spec.submission_dir), type="bind", read_only=True),
        Mount(f"{CODE_TARGET}/submission_api", str(code_dir), type="bind", read_only=True),
        Mount(MOUNT_TARGETS["output"], str(output), type="bind", read_only=spec.output_read_only),
    ]
    if spec.bundle_dir is not None:
        mounts.insert(1, Mount(MOUNT_TARGETS["bundle"], str(spec.bundle_dir), type="bind",
                               read_only=True))
    mounts += [Mount(target, str(host), type="bind", read_only=True)
               for host, target in spec.read_only_mounts]
    return mounts


def build_environment(spec: SandboxSpec) -> dict[str, str]:
    """The container's whole environment beyond the image's own: fixed values plus the spec's."""
    return {**spec.env, "PYTHONPATH": CODE_TARGET, "HOME": "/tmp",
            "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"}


def build_container_kwargs(spec: SandboxSpec, limits: SandboxLimits,
                           output_source: Path | None = None) -> dict[str, Any]:
    """Keyword arguments for `client.containers.create` that enforce `limits` on `spec`.

    `output_source` replaces `spec.output_dir` as the host side of /output when the driver
    bounds the output through a mounted filesystem image.
    """
    mb = 1024 * 1024
    kwargs: dict[str, Any] = {
        "image": spec.image, "command": list(spec.command), "working_dir": spec.workdir,
        "environment": build_environment(spec), "mounts": build_mounts(spec, output_source),
        "user": f"{SANDBOX_UID}:{SANDBOX_GID}", "network_mode": "none", "read_only": True,
        "cap_drop": ["ALL"], "security_opt": ["no-new-privileges:true"], "privileged": False,
        "ipc_mode": "private", "init": True, "hostname": "sandbox",
        "mem_limit": limits.memory_mb * mb, "memswap_limit": limits.memory_mb * mb,
        "nano_cpus": int(limits.cpus * 1e9), "pids_limit": limits.pids,
        "shm_size": limits.shm_mb * mb,
        "tmpfs": {"/tmp": f"rw,nosuid,nodev,exec,size={limits.tmp_mb}m,mode=1777",
                  **({PRIVATE_COPY_TARGET: f"rw,nosuid,nodev,exec,size={limits.memory_mb}m,"
                                           "mode=1777"} if spec.private_copy else {})},
        "ulimits": [Ulimit(name="nofile", soft=NOFILE_LIMIT, hard=NOFILE_LIMIT),
                    Ulimit(name="core", soft=0, hard=0)],
        # The driver streams stdout/stderr itself, capped; the daemon keeps no log file to fill.
        "log_config": LogConfig(type="none"),
        "labels": dict(CONTAINER_LABELS), "stdin_open": False, "tty": False,
        "detach": True, "auto_remove": False,
    }
    if spec.task_namespaces:
        kwargs["security_opt"].append(sandbox_seccomp.security_option())
    if limits.cpuset_cpus is not None:
        kwargs["cpuset_cpus"] = limits.cpuset_cpus  # the worker slot's own cores
    if limits.gpus:
        kwargs["device_requests"] = [
            DeviceRequest(device_ids=list(limits.gpus), capabilities=[["gpu"]])]
    if spec.name:
        kwargs["name"] = spec.name
    return kwargs
