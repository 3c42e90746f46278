"""The dentry channel between two test tasks of one run, folder by folder (issue 34).

A writer task looks up names that do not exist (`stat` fails) in one folder, one set of names
per bit set; a later task, in namespaces of its own like every test task
(`runner/namespaces.py`: a new user and mount namespace), times its lookups of the same names.
Run inside one sandbox container (the meta-test stage's settings: read-only root, uid 1000, no
capabilities, our seccomp profile plus `pivot_root` and `umount2`, which the per-task root
needs), for each kind of folder a task can reach:

- the image's folders (the container's overlay), its root folder, the platform's code (a bind
  of the worker's folder), /proc, /sys and /dev;
- a folder on a tmpfs (the run's private copy lives on one: `runner/private_copy.py`);
- the image's folder seen through a fresh overlay mounted by each task (a new superblock has
  its own dentries, but its lookups go down to the container's overlay);
- the image's folder bound into a fresh per-task root (`pivot_root`, the old root detached).

Each beside a control (names no one looked up: chance). Then the per-task cost of the root
(`runner/task_root.py`) beside the namespaces alone, interleaved.

    .venv/bin/python benchmarks/bench_task_dentry.py [--image IMAGE] [--bits 256] [--names 1]
        [--rounds 20]

Measured on the loaded 2-core host (2026-12-05 07:16-07:52 UTC, load 13-22, 256 bits, one
`stat` a bit), six runs: the image's folders, its root folder, site-packages, the platform's
code and /sys 93.0-100% of bits right (set 1.8-3.1 us, unset 3.7-12.1 us); a fresh overlay
69.1-97.7%, a fresh root with the image's folder bound in 89.1-100%; a tmpfs folder, /proc and
/dev 44.9-64.8% (6 of 18 readings 57.4-64.8%, right after the writer: a residue, not bounded
yet); controls 43.8-55.9%. Cost: the copy 4.15-4.60 s per run (11,904 files, 290 MB),
0.65-0.90x a fresh `import torch` beside it; per task `namespaces.enter` +10.2 / +17.1 /
+25.0 / +28.5 / +80.7 ms with the root (medians of 5-15 interleaved rounds; 4.4-57.3 ms
without it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from worker import sandbox_seccomp  # noqa: E402

PROBE = r'''
import ctypes, json, os, random, statistics, sys, time
libc = ctypes.CDLL(None, use_errno=True)
bits, names = int(sys.argv[1]), int(sys.argv[2])
NEWUSER, NEWNS, NEWIPC, NEWNET = 0x10000000, 0x20000, 0x8000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x1000, 0x4000, 0x40000
MNT_DETACH = 2

def check(result, what):
    if result != 0:
        raise OSError(ctypes.get_errno(), what + ": " + os.strerror(ctypes.get_errno()))

def namespaces():
    uid, gid = os.getuid(), os.getgid()
    check(libc.unshare(NEWUSER | NEWNS | NEWIPC | NEWNET), "unshare")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                       ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as handle:
            handle.write(text)
    check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "private")
    check(libc.mount(b"tmpfs", b"/tmp", b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=1777"), "tmp")

def fresh_overlay(folder):
    os.mkdir("/tmp/empty"); os.mkdir("/tmp/view")  # no upper: two lower layers at least
    check(libc.mount(b"overlay", b"/tmp/view", b"overlay", MS_NOSUID | MS_NODEV,
                     f"lowerdir={folder}:/tmp/empty,userxattr".encode()), "overlay")
    return "/tmp/view"

def fresh_root(folder):
    root = "/tmp/root"
    os.mkdir(root)
    check(libc.mount(b"tmpfs", root.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=0755"),
          "root")
    for place in ("proc", "dev", "old", "seen"):
        os.mkdir(f"{root}/{place}")
    for source, target in (("/proc", "proc"), ("/dev", "dev"), (folder, "seen")):
        check(libc.mount(source.encode(), f"{root}/{target}".encode(), None,
                         MS_BIND | MS_REC, None), "bind " + source)
    check(libc.syscall(155, root.encode(), f"{root}/old".encode()), "pivot_root")
    os.chdir("/")
    check(libc.umount2(b"/old", MNT_DETACH), "umount old")
    os.rmdir("/old")
    return "/seen"

def look(path):
    began = time.perf_counter_ns()
    try:
        os.stat(path)
    except OSError:
        pass
    return time.perf_counter_ns() - began

def task(mode, folder, tag, pattern, out):
    pid = os.fork()
    if pid:
        os.waitpid(pid, 0)
        return
    code = 1
    try:
        report = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644) if out else -1
        namespaces()
        if mode.startswith("overlay:"):
            folder = fresh_overlay(folder)
        elif mode.startswith("root:"):
            folder = fresh_root(folder)
        def name(i, k):
            return f"{folder.rstrip('/')}/arena-dentry-{tag}-{i}-{k}"
        if mode.endswith("write"):
            for i, bit in enumerate(pattern):
                if bit:
                    for k in range(names):
                        look(name(i, k))
        else:
            times = [sum(look(name(i, k)) for k in range(names)) for i in range(bits)]
            os.write(report, json.dumps(times).encode())
        code = 0
    except BaseException as error:
        sys.stderr.write(f"{mode} {folder}: {error!r}\n")
    finally:
        os._exit(code)

def right(times, pattern):
    cut = sorted(times)[len(times) // 2]
    return sum(int(t < cut) == b for t, b in zip(times, pattern)) / len(times)

def channel(kind, folder):
    rng = random.Random()
    tag, control = f"t{rng.getrandbits(40):x}", f"c{rng.getrandbits(40):x}"
    pattern = [rng.getrandbits(1) for _ in range(bits)]
    prefix = {"plain": "", "overlay": "overlay:", "root": "root:"}[kind]
    task(prefix + "write", folder, tag, pattern, None)
    out = f"/run/arena-copy/times-{tag}.json"
    task(prefix + "read", folder, tag, pattern, out)
    found = json.load(open(out))
    task(prefix + "read", folder, control, pattern, out)
    base = json.load(open(out))
    return {"right": right(found, pattern), "control": right(base, pattern),
            "set_us": statistics.median(t for t, b in zip(found, pattern) if b) / 1e3,
            "unset_us": statistics.median(t for t, b in zip(found, pattern) if not b) / 1e3}

os.makedirs("/run/arena-copy/tree", exist_ok=True)
cases = [("image folder (overlay)", "plain", "/usr/share/doc"),
         ("site-packages (overlay)", "plain", "/usr/local/lib/python3.11/dist-packages"),
         ("root folder /", "plain", "/"),
         ("platform code (bind of the host's folder)", "plain", "/opt/arena/submission_api"),
         ("/proc", "plain", "/proc"), ("/sys/kernel", "plain", "/sys/kernel"),
         ("/dev (the container's tmpfs)", "plain", "/dev"),
         ("tmpfs folder (the run's copy)", "plain", "/run/arena-copy/tree"),
         ("image folder through a fresh overlay", "overlay", "/usr/share/doc"),
         ("image folder bound into a fresh root", "root", "/usr/share/doc")]
for label, kind, folder in cases:
    try:
        print(json.dumps({"case": label, **channel(kind, folder)}), flush=True)
    except Exception as error:
        print(json.dumps({"case": label, "error": repr(error)}), flush=True)
'''


COST = r'''
import json, os, statistics, subprocess, sys, time
from pathlib import Path
from submission_api.runner import namespaces, private_copy, task_root
rounds = int(sys.argv[1])
scratch, visible = [Path("/tmp")], [Path("/submission"), Path("/learner")]
copies, _ = private_copy.make_for_run(visible, Path("/run/arena-copy"))
began = time.monotonic()
root, why = task_root.for_run(Path("/run/arena-copy"), scratch, visible)
prepare = time.monotonic() - began
assert root is not None, why
began = time.monotonic()
subprocess.run([sys.executable, "-c", "import torch"], check=True)
preload = time.monotonic() - began
counters = namespaces.snapshot_counters()

def enter(with_root):
    task_root.use(root if with_root else None)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        began = time.perf_counter()
        namespaces.enter(scratch, visible, tuple(zip(visible, copies)), counters)
        os.write(write, str(time.perf_counter() - began).encode())
        os._exit(0)
    os.close(write)
    seconds = float(os.read(read, 64))
    os.close(read)
    os.waitpid(pid, 0)
    return seconds

times = {False: [], True: []}
for _ in range(rounds):
    for with_root in (False, True):
        times[with_root].append(enter(with_root))
files = sum(len(f) for _, _, f in os.walk(root.folder))
size = int(subprocess.run(["du", "-sm", str(root.folder)], capture_output=True, text=True
                          ).stdout.split()[0])
print(json.dumps({"prepare_s": prepare, "preload_s": preload, "files": files, "mb": size,
                  "big": len(root.big), "lowers": [str(p) for p in root.lowers],
                  "without_ms": 1e3 * statistics.median(times[False]),
                  "with_ms": 1e3 * statistics.median(times[True])}))
'''


def profile_with_root(folder: Path) -> str:
    """The meta-test profile plus what a per-task root needs (`pivot_root`, `umount2`), as a
    file (the docker command line reads a path)."""
    profile = sandbox_seccomp.build_profile()
    profile["syscalls"].append({"names": ["pivot_root", "umount2"], "action": "SCMP_ACT_ALLOW"})
    (folder / "seccomp.json").write_text(json.dumps(profile))
    return f"seccomp={folder / 'seccomp.json'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--image", default="metadl-arena/sandbox:cpu")
    parser.add_argument("--bits", type=int, default=256)
    parser.add_argument("--names", type=int, default=1)  # lookups per bit
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    code = Path(__file__).resolve().parents[1] / "submission_api"
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "probe.py").write_text(PROBE)
        (Path(folder) / "cost.py").write_text(COST)
        (Path(folder) / "learner").mkdir()
        (Path(folder) / "learner" / "weights").write_bytes(b"w" * 4096)
        os.system(f"chmod -R a+rX {folder}")  # noqa: S605 - our own temporary folder

        def sandbox(*command: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                ["docker", "run", "--rm", "--init", "--network", "none", "--read-only",
                 "--user", "1000:1000", "--cap-drop", "ALL",
                 "--security-opt", "no-new-privileges:true",
                 "--security-opt", profile_with_root(Path(folder)),
                 "--tmpfs", "/tmp:rw,size=64m,mode=1777",
                 "--tmpfs", "/run/arena-copy:rw,size=2048m,mode=1777",
                 "-v", f"{folder}:/probe:ro", "-v", f"{folder}/learner:/learner:ro",
                 "-v", f"{code}:/opt/arena/submission_api:ro", "-e", "PYTHONPATH=/opt/arena",
                 args.image, *command], capture_output=True, text=True, timeout=600)

        cost = sandbox("python3", "/probe/cost.py", str(args.rounds))
        result = sandbox("python3", "/probe/probe.py", str(args.bits), str(args.names))
    sys.stderr.write(cost.stderr + result.stderr)
    for line in cost.stdout.splitlines():
        row = json.loads(line)
        print(f"per run: the copy ({row['files']} files, {row['mb']} MB; {row['big']} big "
              f"files bound from overlays of {row['lowers']}) {row['prepare_s']:.2f} s, "
              f"beside `import torch` in a fresh process {row['preload_s']:.2f} s (ratio "
              f"{row['prepare_s'] / row['preload_s']:.2f})")
        print(f"per task, median of {args.rounds} interleaved: `namespaces.enter` "
              f"{row['without_ms']:.1f} ms without the root, {row['with_ms']:.1f} ms with it "
              f"(ratio {row['with_ms'] / row['without_ms']:.2f}; "
              f"+{row['with_ms'] - row['without_ms']:.1f} ms)")
    for line in result.stdout.splitlines():
        row = json.loads(line)
        if "error" in row:
            print(f"{row['case']:44s} {row['error']}")
            continue
        print(f"{row['case']:44s} {row['right']:6.1%} of {args.bits} bits right "
              f"(set {row['set_us']:.1f} us, unset {row['unset_us']:.1f} us); "
              f"control {row['control']:.1%}")


if __name__ == "__main__":
    main()
