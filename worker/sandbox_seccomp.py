"""The seccomp profile of the meta-test sandbox: Docker's default rules, plus what the trusted
supervisor needs to give every test task namespaces and tmpfs mounts of its own.

Docker's default profile refuses `unshare`, `mount` and `mount_setattr` to a container without
CAP_SYS_ADMIN, so in a sandbox run under it every test task shares /tmp, /dev/shm, IPC and the
PID space with the others (the supervisor's sweep then is the only line). This profile, written
here (not copied from moby), is an allowlist like Docker's: unknown and new system calls fail
with EPERM, and every call Docker's documentation lists as blocked stays blocked but the two of
the task's root below (`BLOCKED`;
`test_sandbox_seccomp.py` checks both lists). It differs from Docker's in these argument-filtered
rules, which only the supervisor's own code uses before any participant code runs:

- `unshare` with exactly the flag sets of `TASK_NAMESPACE_FLAGS` (a new user namespace with mount,
  IPC, network and PID namespaces), nothing else: no `setns`, no other flag combination;
- `mount` with the flags of a private-propagation remount, a bind mount, or a new tmpfs
  (seccomp cannot read the file-system type: the kernel allows an unprivileged user namespace to
  mount only a few kinds (tmpfs, proc, mqueue, ...), and only inside its own mount namespace);
- `mount_setattr` (the read-only view of `runner/isolation.make_read_only_view`);
- `pivot_root`, and `umount2` with MNT_DETACH only: the task's own root (`runner/task_root.py`,
  issue 34), entered and the old root detached in the task's user namespace (without
  CAP_SYS_ADMIN there, which only our setup has, the kernel refuses both). Docker's list
  blocks them; only this profile allows them, never the meta-train one.
`clone` stays as in Docker's profile: no namespace flag at all; `clone3`, whose flags seccomp
cannot read, answers ENOSYS so that libc falls back to `clone`. Participant code loses the three
again: the task filter of `submission_api/runner/seccomp.py` refuses them in every task process.

The meta-train stage keeps Docker's own default profile: there participant code runs from the
start, and nothing of ours needs namespaces. Under an AppArmor host profile (Docker's
`docker-default` denies every `mount`) the supervisor's start-up probe fails, and the tasks fall
back to shared namespaces swept after each task; the run's isolation line says which it got.
"""

from __future__ import annotations

import errno
import json
from typing import Any

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x20000, 0x2000000, 0x4000000, \
    0x8000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
NAMESPACE_FLAGS = (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER
                   | CLONE_NEWPID | CLONE_NEWNET)
TASK_NAMESPACES = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET
TASK_NAMESPACE_FLAGS = (TASK_NAMESPACES, TASK_NAMESPACES | CLONE_NEWPID)
"""The only `unshare` arguments allowed (`runner/isolation.enter_task_namespaces`)."""
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x1000, 0x4000, 0x40000
MOUNT_FLAGS = (MS_REC | MS_PRIVATE, MS_NOSUID | MS_NODEV, MS_BIND | MS_REC)
"""The only `mount` flags allowed: make every mount private, a new tmpfs, a bind mount."""
MNT_DETACH = 2
TASK_ROOT_CALLS = frozenset({"pivot_root", "umount2"})
"""Docker blocks both; the meta-test profile allows them for the task's root (`umount2` with
MNT_DETACH only; `pivot_root`'s arguments are pointers, out of a filter's reach)."""

BLOCKED = frozenset({
    # Docker's documentation, "Significant syscalls blocked by the default profile"
    "acct", "add_key", "bpf", "clock_adjtime", "clock_settime", "create_module",
    "delete_module", "finit_module", "get_kernel_syms", "get_mempolicy", "init_module",
    "ioperm", "iopl", "kcmp", "kexec_file_load", "kexec_load", "keyctl", "lookup_dcookie",
    "mbind", "move_pages", "name_to_handle_at", "nfsservctl", "open_by_handle_at",
    "perf_event_open", "process_vm_readv", "process_vm_writev", "ptrace",
    "query_module", "quotactl", "reboot", "request_key", "set_mempolicy", "setns",
    "settimeofday", "stime", "swapon", "swapoff", "sysfs", "_sysctl", "umount",
    "uselib", "userfaultfd", "ustat", "vm86", "vm86old",
    # gated on capabilities the sandbox never has, or newer mount / io interfaces
    "chroot", "sethostname", "setdomainname", "syslog", "vhangup", "fanotify_init",
    "quotactl_fd", "set_mempolicy_home_node", "migrate_pages", "modify_ldt", "pidfd_getfd",
    "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "memfd_secret",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "personality",
})
"""Never allowed (personality: Docker allows a few personas; nothing here needs one)."""
FILTERED = frozenset({"unshare", "mount", "clone", "umount2"})
"""Allowed only with the arguments above (`mount`, `unshare`: our setup; `clone`: no namespace)."""

ALLOWED = frozenset("""
read write readv writev pread64 pwrite64 preadv pwritev preadv2 pwritev2 sendfile splice tee
vmsplice copy_file_range lseek open openat openat2 creat close close_range dup dup2 dup3 fcntl
flock fsync fdatasync sync syncfs sync_file_range readahead fadvise64 fallocate truncate
ftruncate stat fstat lstat newfstatat statx statfs fstatfs access faccessat faccessat2
getdents getdents64 getcwd chdir fchdir rename renameat renameat2 mkdir mkdirat rmdir link
linkat unlink unlinkat symlink symlinkat readlink readlinkat chmod fchmod fchmodat fchmodat2
chown fchown lchown fchownat umask mknod mknodat utime utimes utimensat futimesat setxattr
lsetxattr fsetxattr getxattr lgetxattr fgetxattr listxattr llistxattr flistxattr removexattr
lremovexattr fremovexattr setxattrat getxattrat listxattrat removexattrat ioctl pipe pipe2
poll ppoll select pselect6 epoll_create epoll_create1 epoll_ctl epoll_wait epoll_pwait
epoll_pwait2 inotify_init inotify_init1 inotify_add_watch inotify_rm_watch fanotify_mark
eventfd eventfd2 signalfd signalfd4 timerfd_create timerfd_settime timerfd_gettime
io_setup io_destroy io_getevents io_pgetevents io_submit io_cancel memfd_create
mmap mprotect munmap mremap msync mincore madvise process_madvise brk mlock mlock2 munlock
mlockall munlockall remap_file_pages pkey_alloc pkey_free pkey_mprotect membarrier mseal
map_shadow_stack cachestat shmget shmat shmdt shmctl semget semop semtimedop semctl msgget
msgsnd msgrcv msgctl mq_open mq_unlink mq_timedsend mq_timedreceive mq_notify mq_getsetattr
socket socketpair bind listen connect accept accept4 getsockname getpeername sendto recvfrom
sendmsg recvmsg sendmmsg recvmmsg shutdown setsockopt getsockopt
fork vfork execve execveat exit exit_group wait4 waitid kill tkill tgkill pidfd_open
pidfd_send_signal set_tid_address set_robust_list get_robust_list futex futex_waitv
futex_wait futex_wake futex_requeue rseq restart_syscall arch_prctl prctl set_thread_area
get_thread_area getpid getppid gettid getpgid setpgid getpgrp getsid setsid getuid geteuid
getgid getegid getresuid getresgid setuid setgid setreuid setregid setresuid setresgid
setfsuid setfsgid getgroups setgroups capget capset uname sysinfo getrlimit setrlimit
prlimit64 getrusage times getpriority setpriority ioprio_get ioprio_set getcpu
sched_yield sched_setparam sched_getparam sched_setscheduler sched_getscheduler
sched_get_priority_max sched_get_priority_min sched_rr_get_interval sched_setaffinity
sched_getaffinity sched_setattr sched_getattr
rt_sigaction rt_sigprocmask rt_sigreturn rt_sigpending rt_sigtimedwait rt_sigqueueinfo
rt_tgsigqueueinfo rt_sigsuspend sigaltstack pause alarm nanosleep clock_nanosleep getitimer
setitimer timer_create timer_settime timer_gettime timer_getoverrun timer_delete
clock_gettime clock_getres gettimeofday time adjtimex getrandom
seccomp landlock_create_ruleset landlock_add_rule landlock_restrict_self mount_setattr
""".split())  # noqa: SIM905 - a word list reads (and diffs) better than 300 quoted names
"""Allowed with any arguments: what Python, numpy, torch (CPU and CUDA) and our runner use."""

ARCHITECTURES = ("SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64")
"""Native 64-bit only: a 32-bit or x32 call (other numbers, other meanings) gets the default."""


def _rule(name: str, action: str = "SCMP_ACT_ALLOW", **extra: Any) -> dict[str, Any]:
    return {"names": [name], "action": action, **extra}


def _arg(index: int, value: int, op: str = "SCMP_CMP_EQ", mask: int = 0) -> dict[str, Any]:
    return {"index": index, "value": value, "valueTwo": mask, "op": op}


def build_profile(task_namespaces: bool = True) -> dict[str, Any]:
    """The profile as Docker reads it (`security_opt=["seccomp=<json>"]`).

    `task_namespaces=False` leaves out the `unshare`, `mount` and `mount_setattr` rules (what
    Docker's default gives): the supervisor's probe fails and tasks share namespaces, as under
    an AppArmor profile that denies mount.
    """
    allowed = sorted(ALLOWED - ({"mount_setattr"} if not task_namespaces else set()))
    rules: list[dict[str, Any]] = [{"names": allowed, "action": "SCMP_ACT_ALLOW"}]
    # clone(flags, ...): flags is argument 0 on x86_64 and aarch64; no namespace bit at all.
    rules.append(_rule("clone", args=[_arg(0, 0, "SCMP_CMP_MASKED_EQ", NAMESPACE_FLAGS)]))
    rules.append(_rule("clone3", "SCMP_ACT_ERRNO", errnoRet=errno.ENOSYS))
    if task_namespaces:
        rules += [_rule("unshare", args=[_arg(0, flags)]) for flags in TASK_NAMESPACE_FLAGS]
        # mount(source, target, type, flags, data): only the flags can be read (argument 3).
        rules += [_rule("mount", args=[_arg(3, flags)]) for flags in MOUNT_FLAGS]
        rules += [_rule("pivot_root"), _rule("umount2", args=[_arg(1, MNT_DETACH)])]
    return {"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": errno.EPERM,
            "architectures": list(ARCHITECTURES), "syscalls": rules}


def security_option(task_namespaces: bool = True) -> str:
    """The `security_opt` entry that installs the profile (Docker reads the JSON inline)."""
    return "seccomp=" + json.dumps(build_profile(task_namespaces), separators=(",", ":"))
