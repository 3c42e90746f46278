# ruff: noqa: E501 - the snippets are participant source, kept one statement per line
"""Participant code that attacks the sandbox from inside, as hook sources for `make_model_zip`.

Probes that the platform must survive without failing the run print one `ARENA-PROBE {json}`
line: each attempt maps to "ALLOWED" or the exception that stopped it. The other snippets are
participant faults that must end the run in a documented state.
"""

from __future__ import annotations

PROBE = r'''
import errno, glob, json, socket
report = {}
def attempt(name, action):
    try:
        action()
        report[name] = "ALLOWED"
    except BaseException as error:  # noqa
        report[name] = f"{type(error).__name__}: {error}"[:160]

# --- network egress: DNS, TCP (IP literal, so no DNS is needed), UDP, the host's server port
attempt("net.dns", lambda: socket.getaddrinfo("example.com", 80))
attempt("net.tcp", lambda: socket.create_connection(("1.1.1.1", 443), timeout=3).close())
attempt("net.tcp_docker_host", lambda: socket.create_connection(("172.17.0.1", SERVER_PORT), timeout=3).close())
attempt("net.tcp_loopback_server", lambda: socket.create_connection(("127.0.0.1", SERVER_PORT), timeout=3).close())
def udp():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(3)
        sock.sendto(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07example\x03com\x00\x00\x01\x00\x01", ("8.8.8.8", 53))
        sock.recvfrom(512)
attempt("net.udp", udp)
def unix_docker():
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect("/var/run/docker.sock")
attempt("secret.docker_sock", unix_docker)

# --- writes outside /output
for folder in ("/", "/submission", "/bundle", "/bundle/meta_test", "/opt/arena",
               "/opt/arena/submission_api", "/etc", "/usr/lib", "/root"):
    def write(folder=folder):
        with open(os.path.join(folder, "arena-probe.txt"), "w") as handle:
            handle.write("x")
    attempt("write." + folder, write)
attempt("write.chmod_bundle", lambda: os.chmod("/bundle/run.json", 0o666))
attempt("write.output_ok", lambda: open("/output/probe-ok.txt", "w").close())

# --- /tmp is bounded: fill it, then free it again
def fill_tmp():
    written = 0
    try:
        with open("/tmp/filler", "wb") as handle:
            while written < 4 * 2**30:
                handle.write(b"\xab" * 2**20)
                written += 2**20
    finally:
        report["tmp.filled_mib"] = written // 2**20
        os.remove("/tmp/filler")
attempt("tmp.fill", fill_tmp)

# --- secrets and labels in every plausible place
words = ("TOKEN", "SECRET", "PASSWORD", "DATABASE", "BROKER", "REDIS", "POSTGRES")
report["env.secret_names"] = [k for k in os.environ if any(w in k.upper() for w in words)]
def read_text(path):
    with open(path, "rb") as handle:
        return handle.read().decode(errors="replace")
def scan_proc():
    found, pids = [], [p for p in os.listdir("/proc") if p.isdigit()]
    for pid in pids:
        for part in ("environ", "cmdline"):
            try:
                text = read_text(f"/proc/{pid}/{part}")
            except OSError:
                continue
            if any(w in text.upper() for w in words) or "Bearer" in text:
                found.append(f"{pid}/{part}")
    report["proc.pids"] = len(pids)
    report["proc.secrets"] = found
scan_proc()
attempt("secret.proc1_environ", lambda: read_text("/proc/1/environ"))
report["fs.root"] = sorted(os.listdir("/"))
report["fs.bundle"] = sorted(os.listdir("/bundle"))
names = []
for top in ("/bundle", "/submission", "/opt", "/tmp", "/output", "/home", "/root", "/var", "/srv", "/mnt"):
    for path in glob.glob(top + "/**", recursive=True):
        lower = path.lower()
        if "answer" in lower or "query_label" in lower or "arena-data" in lower:
            names.append(path)
report["fs.label_names"] = names
# the host paths of the mounts are visible in mountinfo: try their siblings (answers, cache)
hosts = []
for line in read_text("/proc/self/mountinfo").splitlines():
    fields = line.split()
    if len(fields) > 4 and fields[4] in ("/bundle", "/submission"):
        hosts.append(fields[3])
for host in hosts:
    parent = os.path.dirname(host.rstrip("/"))
    for guess in (parent + "/answers/query_labels.npy", parent + "/answers",
                  os.path.dirname(os.path.dirname(parent)) + "/cache",
                  os.path.dirname(parent) + "/../cache"):
        attempt("secret.host_path." + guess.rsplit("/", 2)[-2] + "/" + guess.rsplit("/", 1)[-1],
                lambda guess=guess: os.listdir(guess) if not guess.endswith(".npy") else read_text(guess))
attempt("secret.bundle_parent", lambda: os.listdir("/bundle/../answers"))
attempt("secret.worker_cache_home", lambda: os.listdir(os.path.expanduser("~/.arena")))
print("ARENA-PROBE " + json.dumps(report), flush=True)
'''

FORK_BOMB = r'''
import signal
me, started, forks, refused = os.getpid(), time.monotonic(), 0, 0
while time.monotonic() - started < 6 and refused < 200:
    try:
        pid = os.fork()
    except OSError:
        refused += 1
        time.sleep(0.005)
        continue
    if pid == 0:
        continue  # the child keeps forking too: a real bomb
    forks += 1
if os.getpid() != me:
    time.sleep(120)
    os._exit(0)
raise RuntimeError(f"fork bomb contained: {forks} forks made, {refused} refused")
'''

MEMORY_BOMB = r'''
hog = []
while True:
    hog.append(np.ones(16 * 2**20, dtype=np.float32))
'''

FILL_OUTPUT = r'''
written = 0
try:
    with open("/output/filler.bin", "wb") as handle:
        while written < 8 * 2**30:
            handle.write(b"\xcd" * 2**20)
            written += 2**20
except OSError as error:
    print(f"OUTPUT-FULL after {written // 2**20} MiB: {error}", flush=True)
'''

# 64 MiB: a thousand times the log's cap, and past any buffer between the container and the
# worker many times over (a worker that stopped reading past its cap would leave the writes
# blocked until the time limit: seen, with such a worker this run never finished). The
# gigabyte it was went through the engine and the worker's reader for minutes on a loaded host
# (271 s at load 40, past the run's backstop: retried), for the same checks.
FLOODS = r'''
line = b"A" * 1023 + b"\n"
block = line * 1024
for _ in range(64):  # 64 MiB
    sys.stdout.buffer.write(block)
sys.stdout.flush()
junk = bytes(range(256)) * 32 + b"\x00\xff\xfe\x1b[2J\x1b]0;owned\x07" + os.urandom(32 * 1024)
os.write(2, junk)
print("FLOODS-DONE", file=sys.stderr, flush=True)
'''

# A hang asleep, not spinning: its charged wall clock runs out at the limit all the same, and
# the three of them no longer hold a core each for the rest of their 12 s (a spin is stopped
# by the same wall clock, or by CPU time: a CPU-bound run's charge is checked in
# tests/integration/sandbox/test_sandbox_loaded_host.py).
ENDLESS = r'''
while True:
    time.sleep(1)
'''

SIGNALS = r'''
import signal
sent = {}
for name, pid, sig in (("kill9_pid1", 1, signal.SIGKILL), ("kill9_ppid", os.getppid(), signal.SIGKILL),
                       ("stop_pid1", 1, signal.SIGSTOP)):
    try:
        os.kill(pid, sig)
        sent[name] = "sent"
    except OSError as error:
        sent[name] = repr(error)
time.sleep(1)
print("ARENA-SIGNALS survived " + json.dumps(sent), flush=True)
os.kill(1, signal.SIGTERM)  # the init forwards it: this kills the participant side itself
time.sleep(30)
'''

SYMLINKS = r'''
# Meta-train plants links where a file-based scorer would read predictions: nothing reads them
# now (predictions travel over each task's socket to the trusted side).
os.makedirs("/output/predictions", exist_ok=True)
os.symlink("/bundle/run.json", "/output/predictions/task_00000.npy")
os.symlink("../../answers/query_labels.npy", "/output/predictions/task_00001.npy")
os.symlink("/", "/output/rootlink")
'''

PICKLE = r'''
# Bypass the runner: a raw frame announcing an object array, followed by a pickle, written
# straight onto the task's socket.
import pickle, socket, stat
class Payload:
    def __reduce__(self):
        return (os.system, ("touch /tmp/arena-pwned-MARKER",))
blob = pickle.dumps(np.array([Payload()], dtype=object))
header = json.dumps({"type": "predictions", "arrays": [{"dtype": "|O", "shape": [1]}]}).encode()
for fd in range(3, 256):
    try:
        if stat.S_ISSOCK(os.fstat(fd).st_mode):
            socket.socket(fileno=os.dup(fd)).sendall(len(header).to_bytes(4, "big") + header + blob)
    except OSError:
        pass
os._exit(0)
'''

HUGE = r'''
return np.zeros(40_000_000, dtype=np.float32)
'''

EXIT = r'''
print("leaving without a word", flush=True)
os._exit(3)
'''

IMPORT_CRASH = r'''
raise RuntimeError("boom at import: model.py is broken")
'''
