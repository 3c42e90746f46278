"""Every limit of the Docker sandbox bites, and the driver survives each of them.

Each test runs a tiny Python script as the 'submission' (not the full runner); the autouse
fixture `driver_still_works` then checks that an ordinary run still succeeds.
"""

from __future__ import annotations

import json
import os
import re
import threading

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.docker]

NETWORK = """
import json, socket
outcome = {}
try:
    socket.create_connection(("1.1.1.1", 53), timeout=3)
    outcome["connect"] = "connected"
except OSError as error:
    outcome["connect"] = type(error).__name__
try:
    socket.getaddrinfo("example.com", 80)
    outcome["dns"] = "resolved"
except OSError as error:
    outcome["dns"] = type(error).__name__
outcome["interfaces"] = [line.split(":")[0].strip() for line in open("/proc/net/dev")
                         if ":" in line]
print(json.dumps(outcome))
"""


def test_network_connect_and_dns_lookup_fail(run_script):
    result = run_script(NETWORK)
    assert result.exit_code == 0, result.stderr
    outcome = json.loads(result.stdout)
    assert outcome["connect"] != "connected"
    assert outcome["dns"] != "resolved"
    assert outcome["interfaces"] == ["lo"]


WRITES = """
import json, os
outcome = {}
for folder in ["/", "/etc", "/usr", "/submission", "/bundle", "/opt/arena",
               "/opt/arena/submission_api", "/home", "/var", "/output", "/tmp"]:
    path = os.path.join(folder, "arena-write-probe")
    try:
        with open(path, "w") as handle:
            handle.write("x")
        outcome[folder] = "written"
    except OSError as error:
        outcome[folder] = error.strerror
print(json.dumps(outcome))
"""


def test_only_output_and_tmp_are_writable(run_script, tmp_path):
    for name in ("submission", "bundle"):  # world-writable: only the read-only mount protects
        (tmp_path / name).mkdir()
        (tmp_path / name).chmod(0o777)
    # The code mount is a throwaway stand-in for submission_api, never the package itself: a
    # failed check must not leave a probe in the source tree (it was once committed there).
    code = tmp_path / "code" / "submission_api"
    code.mkdir(parents=True)
    (code / "__init__.py").write_text("")
    code.chmod(0o777)
    result = run_script(WRITES, code_dir=code)
    assert result.exit_code == 0, result.stderr
    outcome = json.loads(result.stdout)
    writable = sorted(folder for folder, what in outcome.items() if what == "written")
    assert writable == ["/output", "/tmp"], outcome
    assert sorted(os.listdir(tmp_path / "submission")) == ["main.py"]
    assert sorted(os.listdir(tmp_path / "bundle")) == ["bundle.txt"]
    assert sorted(os.listdir(code)) == ["__init__.py"]


FORK_BOMB = """
import os, time
refused = False
while True:
    try:
        os.fork()
    except OSError:
        if not refused:
            print("fork refused", flush=True)
            refused = True
        time.sleep(0.05)
"""


def test_fork_bomb_is_stopped_by_the_pids_limit_and_the_wall_clock(run_script):
    result = run_script(FORK_BOMB, pids=32, wall_time_s=5.0)
    assert "fork refused" in result.stdout
    assert result.timed_out
    assert not result.oom_killed


MEMORY_HOG = """
chunks = []
for _ in range(256):
    chunks.append(bytearray(16 * 1024 * 1024))  # zero-filled: every page is touched
print("survived", flush=True)
"""


def test_memory_hog_ends_oom_killed(run_script):
    result = run_script(MEMORY_HOG, memory_mb=64)
    assert result.oom_killed, result
    assert result.exit_code == 137
    assert not result.timed_out
    assert "survived" not in result.stdout


ENDLESS = """
import time
print("looping", flush=True)
while True:
    time.sleep(0.1)
"""


def test_endless_loop_ends_timed_out(run_script):
    result = run_script(ENDLESS, wall_time_s=3.0)
    assert result.timed_out
    assert not result.oom_killed
    assert result.exit_code == 137
    assert result.wall_time_s >= 3.0
    assert result.stdout == "looping\n"


FLOOD = """
import sys
block = "x" * 65536 + "\\n"
for _ in range(320):          # about 20 MB on stdout
    sys.stdout.write(block)
sys.stdout.flush()
sys.stderr.write("done\\n")
"""


def test_stdout_flood_is_truncated_at_the_cap_and_the_run_completes(run_script):
    cap = 4096
    result = run_script(FLOOD, log_cap_bytes=cap)
    assert result.exit_code == 0
    assert result.stdout_truncated
    # The head and the tail of the cap are kept, with a marker saying how much was cut between.
    kept, marks = re.subn(r"\n\[\.\.\. \d+ bytes cut here; [^\]]*\]\n", "", result.stdout)
    assert marks == 1 and len(kept.encode()) == cap
    assert result.stdout.startswith("xxxx")
    assert result.stderr == "done\n"
    assert not result.stderr_truncated


OUTPUT_HOG = """
import sys, time
written = 0
block = b"y" * (1024 * 1024)
try:
    with open("/output/big.bin", "wb") as handle:
        for _ in range(int(sys.argv[1])):
            handle.write(block)
            handle.flush()
            written += len(block)
            time.sleep(float(sys.argv[2]))
except OSError as error:
    print("write failed:", error.strerror, flush=True)
print("written", written, flush=True)
"""


@pytest.mark.parametrize("mechanism", ["auto", "watchdog"])
def test_output_bound_bites(run_script, tmp_path, mechanism):
    bound_mb = 8
    result = run_script(OUTPUT_HOG, "64", "0.05", mechanism=mechanism, output_mb=bound_mb)
    assert result.output_exceeded, result
    assert "written 67108864" not in result.stdout
    kept = tmp_path / "output" / "big.bin"
    if kept.exists():  # the watchdog mechanism overshoots by at most one poll's writes
        assert kept.stat().st_size < 2 * bound_mb * 1024 * 1024


def test_output_within_the_bound_is_not_flagged(run_script, tmp_path):
    result = run_script(OUTPUT_HOG, "4", "0", output_mb=8)
    assert result.ok, result
    assert (tmp_path / "output" / "big.bin").stat().st_size == 4 * 1024 * 1024


IDENTITY = """
import json, os
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print(json.dumps({
    "uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "groups": os.getgroups(),
    **{key: status[key].strip() for key in
       ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"]},
}))
"""


def test_runs_as_uid_1000_without_capabilities(run_script):
    result = run_script(IDENTITY)
    assert result.exit_code == 0, result.stderr
    who = json.loads(result.stdout)
    assert (who["uid"], who["euid"], who["gid"]) == (1000, 1000, 1000)
    assert who["groups"] in ([], [1000])
    for key in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"]:
        assert int(who[key], 16) == 0, f"{key}={who[key]}"
    assert who["NoNewPrivs"] == "1"
    assert who["Seccomp"] == "2"


def test_cancel_kills_the_run_and_is_not_read_as_out_of_memory(run_script):
    cancel = threading.Event()
    timer = threading.Timer(1.0, cancel.set)
    timer.start()
    result = run_script(ENDLESS, cancel=cancel)
    timer.join()
    assert result.cancelled
    assert not result.oom_killed and not result.timed_out
    assert not result.ok
