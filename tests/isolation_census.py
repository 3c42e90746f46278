"""The channel census (issue 19): a probe submission that, in every test task, first looks for
any earlier task's nonce in every channel it knows, records the attributes it started with,
then writes a fresh nonce into every channel it can reach and reads each one back (so a channel
counts as written only when the probe's own reader finds its nonce there: the census cannot pass
by writing nothing). It answers valid predictions and prints one `CENSUS {json}` line to stderr
per task: `found` (nonces of earlier tasks: must stay empty), `start` (attributes a task starts
with: must be the same in every task), `wrote` (channels it wrote and read back) and `world`
(its pid, namespaces and writable places beside init's: where tasks get namespaces and fresh
tmpfs mounts of their own, `shared_with_init` must find nothing, which shows that what a task
left cannot reach the next even without the supervisor's sweep).

Channels: files, mode-000 folders and socket files in every writable folder; a `user.*` xattr on
each writable folder's own inode; a System V segment and queue handed to uid 65534; a daemon
process (its name, and an abstract socket it serves) left running; soft rlimits and CPU
affinity set on every other process of its uid (the supervisor, the fork server); the flags
and pipe size of its stdout; the frames it was called from and the objects of its heap.

Residency (issue 34): in each of a large shipped file, a learner file and a file of the image
that nothing maps, the probe reads which pages are resident without any refused oracle (it
touches one page at a time through a MADV_RANDOM mapping and counts major faults: a page not in
the page cache costs one) and writes its nonce by touching chosen pages (two per bit, in the
first region whose marker page was not resident). `residency` reports, per file, the pages it
found resident of those it probed and the nonces it decoded: where the trusted side keeps the
pages resident (the private tmpfs copy, the worker's pre-fault), every page reads resident in
every task and nothing decodes.
Importable by name: tests put this folder on sys.path.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

CENSUS_MODEL = r'''
import ctypes, gc, json, mmap, os, re, resource, signal, socket, sys, tempfile, time
import numpy as np
from submission_api.api import Learner, MetaLearner, Predictor

NONCE = re.compile(r"cns[0-9a-f]{8}")
ABSTRACT = b"\0arena-census"
SHM_KEY, MSG_KEY = 0x43454E53, 0x43454E54
LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.shmat.restype = ctypes.c_void_p
LIBC.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]


def folders():
    here = os.path.dirname(os.path.abspath(__file__))
    found = [tempfile.gettempdir(), os.environ.get("HOME"), os.environ.get("TMPDIR"), "/tmp",
             "/var/tmp", "/dev/shm", "/output", os.getcwd(), here, "/learner"]
    return [f for f in dict.fromkeys(found) if f and os.path.isdir(f)]


def hand_over(table, ident):  # IPC_SET the owner to 65534: an owner-based sweep would skip it
    buffer = (ctypes.c_char * 512)()
    call = LIBC.shmctl if table == "shm" else LIBC.msgctl
    if call(ident, 2, buffer) != 0:
        return False
    ctypes.c_uint.from_buffer(buffer, 4).value = 65534
    return call(ident, 1, buffer) == 0


def other_pids():
    """Processes of this uid (from their status: a process that is not dumpable has a /proc
    folder owned by root)."""
    uid, me, found = os.getuid(), os.getpid(), []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != me:
            try:
                for line in open(f"/proc/{name}/status"):
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) == uid:
                            found.append(int(name))
                        break
            except (OSError, ValueError):
                pass
    return found


def outer_parent(pid):
    """The parent's pid as /proc numbers it (getppid() is 0 in a PID namespace of one's own)."""
    return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])


def targets():
    """The processes a task can change that later tasks come from: the fork server (the
    parent of its parent, which was made for this task alone and ends with it), the
    supervisor above it and the supervisor's other children, and, in a container, its init.
    Never the rest of the machine: under `arena run` as root that would be every root process
    on it."""
    me, found = os.getpid(), []
    try:
        forks = outer_parent(outer_parent("self"))
        parent = outer_parent(forks)
        found += [forks, parent]
    except (OSError, ValueError, IndexError):
        parent = 0
    try:
        for task in os.listdir(f"/proc/{parent}/task"):
            found += [int(c) for c in open(f"/proc/{parent}/task/{task}/children").read().split()]
    except OSError:
        pass
    try:
        if open("/proc/1/comm").read().strip() in ("docker-init", "tini") and 1 in other_pids():
            found.append(1)
    except OSError:
        pass
    return [pid for pid in dict.fromkeys(found) if pid != me]


def read_all():
    """Every nonce visible in any channel: {channel: [nonces]}."""
    found = {}
    def add(channel, text):
        for nonce in NONCE.findall(text if isinstance(text, str) else text.decode("latin-1")):
            found.setdefault(channel, []).append(nonce)
    # Memory first, before this read itself puts what it finds elsewhere in the heap.
    frame, texts = sys._getframe(1), []
    while frame is not None:
        texts += [repr(v)[:2000] for v in frame.f_locals.values() if not callable(v)]
        frame = frame.f_back
    add("frames", " ".join(texts))
    add("heap", " ".join(o for o in (gc.get_referents(*gc.get_objects()) or [])
                         if isinstance(o, str) and o.startswith("cns")))
    for folder in folders():
        try:
            names = os.listdir(folder)
        except OSError:
            names = []
        for name in names:
            if not name.startswith(".census"):
                continue
            path = os.path.join(folder, name)
            add(f"file {path}", name)
            try:
                if os.path.isdir(path):
                    os.chmod(path, 0o700)
                    for inner in os.listdir(path):
                        add(f"locked folder {path}", open(os.path.join(path, inner)).read())
                elif os.path.isfile(path):
                    add(f"file {path}", open(path).read())
            except OSError:
                pass
        try:
            add(f"xattr on {folder}", os.getxattr(folder, "user.census"))
        except OSError:
            pass
    ident = LIBC.shmget(SHM_KEY, 0, 0)
    if ident >= 0:
        address = LIBC.shmat(ident, None, 0o10000)  # SHM_RDONLY
        if address not in (None, ctypes.c_void_p(-1).value):
            add("System V segment", ctypes.string_at(address, 11))
            LIBC.shmdt(ctypes.c_void_p(address))
    if LIBC.msgget(MSG_KEY, 0) >= 0:
        found.setdefault("System V queue", []).append("present")
    for pid in other_pids():
        try:
            add(f"process {pid}", open(f"/proc/{pid}/comm").read())
        except OSError:
            pass
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(1)
            client.connect(ABSTRACT)
            add("abstract socket", client.recv(64))
    except OSError:
        pass
    return found


def start_state():
    """What a task starts with (the same in every task, or it carries something)."""
    fds = sorted(os.listdir("/proc/self/fd"))
    import fcntl
    stdio = []
    for fd in (0, 1, 2):
        try:
            size = fcntl.fcntl(fd, 1032)  # F_GETPIPE_SZ
        except OSError:
            size = None
        try:
            stdio.append((fcntl.fcntl(fd, fcntl.F_GETFL), size))
        except OSError:
            stdio.append(None)
    umask = os.umask(0o022)
    os.umask(umask)
    limits = {n: resource.getrlimit(getattr(resource, n)) for n in dir(resource)
              if n.startswith("RLIMIT_")}
    others = {}
    for pid in targets():  # the supervisor, the fork server, the sandbox's init
        try:
            others[str(pid)] = [os.getpriority(0, pid), sorted(os.sched_getaffinity(pid)),
                                [resource.prlimit(pid, getattr(resource, n)) for n in limits]]
        except OSError:
            pass
    return {"others": others, "counters": trusted_counters(), "rlimits": limits,
            "nice": os.getpriority(0, 0),
            "affinity": sorted(os.sched_getaffinity(0)), "umask": umask, "fds": len(fds),
            "stdio": stdio, "environ": sorted(os.environ),
            "signals": [str(signal.getsignal(s)) for s in sorted(signal.valid_signals())
                        if s not in (signal.SIGKILL, signal.SIGSTOP)],
            "blocked": sorted(signal.pthread_sigmask(signal.SIG_BLOCK, []))}


def trusted_counters():
    """The children's counters (minor and major faults, user and system time of the children
    it reaped) of the trusted processes of this run that outlive tasks, found by their command
    line: a task's own faults and CPU time, if they reached one of them, would tell the next
    task how much its predecessor chose to burn. Not the task's outer parent (made for this
    task), and never another run's supervisor (another test or worker on the host moves its
    own counters between our tasks)."""
    def fields(pid):
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()

    def supervised(pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                return b"submission_api.runner.supervisor" in handle.read()
        except OSError:
            return False

    me = fields("self")
    skip, found = {me[1]}, {}  # the outer parent's pid, in the procfs's own numbering
    root, pid = None, me[1]  # this run's top supervisor: the highest one among our ancestors
    while pid != "0":
        root = pid if supervised(pid) else root
        try:
            pid = fields(pid)[1]
        except (OSError, IndexError):
            break
    ours, queue = set(), [root] if root else []
    while queue:  # the top supervisor and everything below it
        pid = queue.pop()
        ours.add(pid)
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                queue += open(f"/proc/{pid}/task/{task}/children").read().split()
        except OSError:
            pass
    uid = os.getuid()
    for name in sorted(ours):
        if name in skip or os.path.realpath("/proc/self") == f"/proc/{name}":
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid not in (uid, 0) or not supervised(name):
                continue
            rest = fields(name)
            counts = [int(rest[i]) for i in (8, 10, 13, 14)]  # cminflt cmajflt cutime cstime
            if any(counts):  # all zero says nothing (the next task's standby has reaped none)
                found[name] = counts
        except (OSError, ValueError, IndexError):
            pass
    return found


MACHINE = ("stat", "vmstat", "loadavg", "meminfo", "uptime", "interrupts", "softirqs",
           "schedstat", "diskstats", "pressure/cpu", "sys/fs/file-nr", "sys/fs/dentry-state")


SYS_MACHINE = ("/sys/block/*/stat", "/sys/devices/system/cpu/cpu*/cpuidle/state*/usage",
               "/sys/devices/system/cpu/cpu*/cpuidle/state*/time",
               "/sys/devices/system/node/node*/vmstat")


def machine_counters():
    """A digest of the machine's own counters in /proc (CPU time, forks and page faults since
    boot, ...) and /sys (block I/O, idle time of each CPU, each node's page counts): each task
    burns CPU, forks, touches pages and reads a file past the page cache (`census`), and the
    CPUs idle between tasks, so where a task reads the live files they differ from one task to
    the next."""
    import glob
    import hashlib
    found = {}
    names = [f"/proc/{name}" for name in MACHINE]
    names += sorted(path for pattern in SYS_MACHINE for path in glob.glob(pattern))
    for name in names:
        try:
            found[name] = hashlib.sha256(open(name, "rb").read()).hexdigest()[:16]
        except OSError:
            pass
    return found


def daemon(nonce):
    ready, done = os.pipe()
    if os.fork():
        os.close(done)
        os.read(ready, 1)  # the daemon serves (or failed to): an EOF either way
        os.close(ready)
        return
    os.close(ready)
    os.setsid()
    if os.fork():
        os._exit(0)
    try:
        LIBC.prctl(15, nonce.encode(), 0, 0, 0)  # PR_SET_NAME: /proc/<pid>/comm
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            server.bind(ABSTRACT)
        except OSError as error:
            print(f"census: abstract socket: {error}", file=sys.stderr, flush=True)
            raise
        server.listen(4)
        os.write(done, b"1")
        os.close(done)
        while True:
            client, _ = server.accept()
            client.sendall(nonce.encode())
            client.close()
    finally:
        os._exit(0)


def write_all(nonce):
    for folder in folders():
        try:
            open(os.path.join(folder, f".census-{nonce}"), "w").write(nonce)
            locked = os.path.join(folder, f".census-locked-{nonce}")
            os.mkdir(locked)
            open(os.path.join(locked, "memory"), "w").write(nonce)
            os.chmod(locked, 0)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as path_socket:
                path_socket.bind(os.path.join(folder, f".census-sock-{nonce}"))
        except OSError:
            pass
        try:
            os.setxattr(folder, "user.census", nonce.encode())
        except OSError:
            pass
    ident = LIBC.shmget(SHM_KEY, 4096, 0o1000 | 0o666)
    if ident >= 0:
        address = LIBC.shmat(ident, None, 0)
        if address not in (None, ctypes.c_void_p(-1).value):
            ctypes.memmove(address, nonce.encode(), len(nonce))
            LIBC.shmdt(ctypes.c_void_p(address))
        hand_over("shm", ident)
    queue = LIBC.msgget(MSG_KEY, 0o1000 | 0o666)
    if queue >= 0:
        hand_over("msg", queue)
    daemon(nonce)
    code = int(nonce[3:], 16)
    for pid in targets():
        for name in ("RLIMIT_MSGQUEUE", "RLIMIT_NOFILE", "RLIMIT_CORE"):
            number = getattr(resource, name)
            try:
                soft, hard = resource.prlimit(pid, number)
                top = hard if hard != resource.RLIM_INFINITY else 1 << 20
                resource.prlimit(pid, number, (max(0, top - 1 - code % 256), hard))
            except (OSError, ValueError):
                pass
        try:
            cpus = sorted(os.sched_getaffinity(pid))
            if len(cpus) > 1:
                os.sched_setaffinity(pid, cpus[:1])
        except OSError:
            pass
    import fcntl
    for fd in (1, 2):
        try:
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)
            fcntl.fcntl(fd, 1031, 4096 * (1 + code % 4))  # F_SETPIPE_SZ
        except OSError:
            pass


def world():
    """Where this task runs: its pid, its namespaces and those of the container's (or the
    machine's) init, and the devices of its writable places and of init's (a fresh tmpfs has
    a device number of its own)."""
    def ns(pid):
        found = {}
        for kind in ("user", "mnt", "ipc", "net", "pid"):
            try:
                found[kind] = os.stat(f"/proc/{pid}/ns/{kind}").st_ino
            except OSError:
                pass
        return found
    def devices(root):
        found = {}
        for place in ("/tmp", "/dev/shm"):
            try:
                found[place] = os.stat(root + place).st_dev
            except OSError:
                pass
        return found
    table = [line.split() for line in open("/proc/self/mountinfo")]
    mounts = [fields[4] for fields in table]
    kinds = {fields[4]: fields[fields.index("-") + 1] for fields in table}  # the top one
    return {"pid": os.getpid(), "ns": ns("self"), "init_ns": ns(1), "dev": devices(""),
            "root_kind": kinds.get("/"),
            "copy_kinds": {place: kinds.get(place) for place in ("/submission", "/learner")},
            "init_dev": devices("/proc/1/root"),
            "uid_map": open("/proc/self/uid_map").read().split(),
            "mounts": {place: mounts.count(place) for place in ("/tmp", "/dev/shm")},
            "copies": {place: mounts.count(place) for place in ("/submission", "/learner")},
            "cgroup": sorted(os.listdir("/sys/fs/cgroup")) if os.path.isdir("/sys/fs/cgroup")
            else []}


def move_machine_counters():
    """Burn CPU time, fork and touch fresh pages: what would move the machine's counters."""
    until = time.perf_counter() + 0.02
    while time.perf_counter() < until:
        pass
    for _ in range(3):
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
    bytearray(8 << 20)
    try:  # block I/O: a read the page cache cannot answer (O_DIRECT), where the file system can
        fd = os.open(os.__file__, os.O_RDONLY | os.O_DIRECT)
        try:
            os.preadv(fd, [mmap.mmap(-1, 4096)], 0)
        finally:
            os.close(fd)
    except OSError:
        pass


PAGE, BITS, REGIONS = 4096, 32, 6
REGION = 1 + 2 * BITS
RESIDENCY_FILES = {"shipped": lambda: os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                   "big.bin"),
                   "learner": lambda: os.path.join(LEARNER_PATH[0], "weights.bin"),
                   "image": lambda: os.path.join(os.path.dirname(os.__file__), "pydoc_data",
                                                 "topics.py")}
LEARNER_PATH = ["."]


def residency(nonce):
    """Per file: pages probed, pages found resident, nonces decoded; then this task's nonce
    written into the first free region."""
    report = {}
    code = int(nonce[3:], 16)
    for name, where in RESIDENCY_FILES.items():
        try:
            fd = os.open(where(), os.O_RDONLY)
            size = os.fstat(fd).st_size
            view = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
            os.close(fd)
        except (OSError, ValueError) as error:
            report[name] = {"error": str(error)}
            continue
        view.madvise(mmap.MADV_RANDOM)
        def resident(page):
            before = resource.getrusage(resource.RUSAGE_SELF).ru_majflt
            view[page * PAGE]
            return resource.getrusage(resource.RUSAGE_SELF).ru_majflt == before
        probed = seen = 0
        found, free = [], None
        for region in range(min(REGIONS, size // PAGE // REGION)):
            base = region * REGION
            probed += 1
            if not resident(base):
                free = base
                break
            seen += 1
            pairs = [(resident(base + 1 + 2 * j), resident(base + 2 + 2 * j)) for j in range(BITS)]
            probed += 2 * BITS
            seen += sum(a + b for a, b in pairs)
            if all(a != b for a, b in pairs):
                found.append("cns%08x" % sum(b << j for j, (_, b) in enumerate(pairs)))
        if free is not None:
            for j in range(BITS):
                view[(free + 1 + 2 * j + ((code >> j) & 1)) * PAGE]
        report[name] = {"probed": probed, "resident": seen, "found": found,
                        "wrote": free is not None}
        view.close()
    return report


def census():
    found = read_all()
    start = start_state()
    machine = machine_counters()
    where = world()
    nonce = "cns" + os.urandom(4).hex()
    pages = residency(nonce)
    write_all(nonce)
    move_machine_counters()
    here = read_all()
    wrote = sorted(channel for channel, nonces in here.items() if nonce in nonces)
    print("CENSUS " + json.dumps({"found": found, "start": start, "machine": machine,
                                  "wrote": wrote, "world": where, "residency": pages}),
          file=sys.stderr, flush=True)


class MyPredictor(Predictor):
    def __init__(self, n_ways):
        self.n_ways = n_ways
    def predict(self, query_set):
        census()
        return np.zeros(len(query_set), dtype=np.int64)


class MyLearner(Learner):
    def fit(self, support_set):
        return MyPredictor(support_set[3])
    def save(self, path):
        # O_DIRECT: written past the page cache, so that its pages start out not resident
        # (read in place, a task could then write bits into them for the next)
        data = mmap.mmap(-1, RESIDENCY_BYTES)
        data.write(os.urandom(RESIDENCY_BYTES))
        target = os.path.join(path, "weights.bin")
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        except OSError:  # a file system without O_DIRECT (tmpfs)
            with open(target, "wb") as handle:
                handle.write(data)
    def load(self, path):
        LEARNER_PATH[0] = path


class MyMetaLearner(MetaLearner):
    def meta_fit(self, meta_train_generator, meta_valid_generator):
        return MyLearner()
'''
RESIDENCY_BYTES = 4 << 20
"""The shipped file and the learner file the residency probe reads (pages for 6 regions)."""


def write_census(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.py").write_text(CENSUS_MODEL.replace("RESIDENCY_BYTES",
                                                          str(RESIDENCY_BYTES)))
    with (folder / "big.bin").open("wb") as handle:
        handle.write(os.urandom(RESIDENCY_BYTES))
        handle.flush()
        os.fsync(handle.fileno())
        # out of the page cache (on a disk-backed file system), as a shipped file of a zip
        # long unpacked would be: read in place, a task could write bits into its pages
        os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    return folder


def residency_crossings(reports: list[dict], files: tuple[str, ...]) -> list[str]:
    """Where the page cache carried a nonce or changed between tasks, for `files` (of
    "shipped", "learner", "image"): a nonce decoded, a page found not resident (a task could
    then write it), or a file the probe could not read."""
    problems = []
    for i, report in enumerate(reports):
        for name in files:
            pages = report["residency"].get(name, {"error": "not probed"})
            if "error" in pages:
                problems.append(f"task {i}: {name}: {pages['error']}")
                continue
            problems += [f"task {i}: {name} carried {nonce}" for nonce in pages["found"]]
            if pages["resident"] != pages["probed"] or pages["wrote"]:
                problems.append(f"task {i}: {name}: {pages['resident']} of {pages['probed']} "
                                "probed pages resident: residency a task can change")
    return problems


def parse_census(stderr: str) -> list[dict]:
    """The probe's report of each task, in task order."""
    return [json.loads(line.split("CENSUS ", 1)[1]) for line in stderr.splitlines()
            if line.startswith("CENSUS ")]


def crossings(reports: list[dict]) -> list[str]:
    """Every way one task's state reached a later one: a nonce found, or a start attribute
    that differs from the first task's."""
    problems = [f"task {i}: {channel} held {nonces}" for i, report in enumerate(reports)
                for channel, nonces in report["found"].items()]
    first = reports[0]["start"] if reports else {}
    for i, report in enumerate(reports[1:], start=1):
        problems += [f"task {i} started with another {key}: {report['start'][key]} "
                     f"(task 0: {first[key]})" for key in first
                     if report["start"].get(key) != first[key]]
    return problems


def moved_machine_counters(reports: list[dict]) -> list[str]:
    """The machine's counters in /proc and /sys that a task read differently from the first
    task: where tasks have their own mount namespace, each reads them as they were before the
    first task (`runner/namespaces.MACHINE_COUNTERS`, `SYS_COUNTERS`, `SYS_COUNTER_FOLDERS`),
    so none."""
    first = reports[0]["machine"] if reports else {}
    return [f"task {i} read another {name}" for i, report in enumerate(reports[1:], 1)
            for name in first if report["machine"].get(name) != first[name]]


def shared_with_init(reports: list[dict]) -> list[str]:
    """Every namespace and writable place a task shared with init (the container's, or the
    machine's): where the task's own namespaces and fresh tmpfs mounts are the guarantee, none.
    The task must be pid 1 (its own PID namespace), map only its own uid (its own user
    namespace: init's namespaces are then unreadable to it, and are compared where readable),
    and see /tmp and /dev/shm each mounted over the container's (a fresh tmpfs)."""
    problems = []
    for i, report in enumerate(reports):
        where = report["world"]
        if where["pid"] != 1:
            problems.append(f"task {i} is pid {where['pid']}, not the first of its own PID "
                            "namespace")
        if len(where["uid_map"]) != 3 or where["uid_map"][0] == "0":
            problems.append(f"task {i} maps uids {where['uid_map']}: not a user namespace of "
                            "its own")
        problems += [f"task {i} sees {place} mounted {count} time(s): no fresh tmpfs on it"
                     for place, count in where["mounts"].items() if count < 2]
        if where.get("cgroup"):
            problems.append(f"task {i} reads the container's cgroup tree "
                            f"({', '.join(where['cgroup'][:3])}, ...): its CPU and memory "
                            "counters carry what earlier tasks used")
        problems += [f"task {i} shares init's {kind} namespace" for kind, inode
                     in where["ns"].items() if where["init_ns"].get(kind) == inode]
        problems += [f"task {i} shares init's {place}" for place, device
                     in where["dev"].items() if where["init_dev"].get(place) == device]
    return problems
