"""A hostile submission that never looks at a pixel's meaning: it hashes images and links them
across test tasks (support images that recur join classes; a query image's class is the one
every task it appeared in shares). It keeps that memory through every channel a task's process
might reach — module state, files in every writable-looking folder and in folders of mode 000
(which a sweep cannot enter), a `user.*` xattr on every writable folder's own inode (`/output`
included), a daemon on an abstract and a path unix socket, System V shared memory (handed to
uid 65534, out of an owner-based sweep's reach) and POSIX shared memory — and probes the
supervisor's /proc and the task channel, raising if it can read them.

With any memory surviving between tasks it scores far above chance (`score_in_one_process` shows
it); isolated, each task starts blind and it scores at chance. Importable by name: tests put this
folder on sys.path.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import numpy as np

ATTACK_MODEL = r'''
import ctypes, hashlib, os, pickle, socket, sys, tempfile, time, zlib
import numpy as np
from submission_api.api import Learner, MetaLearner, Predictor

_MEMORY = {}
NAME = ".arena_mem.pkl"
ABSTRACT = b"\0arena-isolation-attack"
SHM_KEY, SHM_SIZE = 0x4152454E, 4 << 20


def _folders():
    here = os.path.dirname(os.path.abspath(__file__))
    found = [tempfile.gettempdir(), os.environ.get("HOME", "/tmp"), "/tmp", "/var/tmp",
             "/dev/shm", "/output", os.getcwd(), here, "/learner"]
    return [f for f in dict.fromkeys(found) if f]


def _sock_path():
    return os.path.join("/tmp", "arena-isolation-attack.sock")


def _read_files():
    states = []
    for folder in _folders():
        try:
            with open(os.path.join(folder, NAME), "rb") as handle:
                states.append(pickle.load(handle))
        except Exception:
            pass
    return states


def _write_files(state):
    blob = pickle.dumps(state)
    for folder in _folders():
        try:
            with open(os.path.join(folder, NAME), "wb") as handle:
                handle.write(blob)
        except Exception:
            pass


def _shm():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmat.restype = ctypes.c_void_p
        ident = libc.shmget(SHM_KEY, SHM_SIZE, 0o1000 | 0o666)
        if ident < 0:
            return None
        address = libc.shmat(ident, None, 0)
        return None if address in (None, ctypes.c_void_p(-1).value) else address
    except Exception:
        return None


def _read_shm():
    address = _shm()
    if address is None:
        return []
    size = int.from_bytes(ctypes.string_at(address, 8), "little")
    if not 0 < size < SHM_SIZE - 8:
        return []
    return [pickle.loads(ctypes.string_at(address + 8, size))]


def _write_shm(state):
    address = _shm()
    blob = pickle.dumps(state)
    if address is not None and len(blob) < SHM_SIZE - 8:
        ctypes.memmove(address + 8, blob, len(blob))
        ctypes.memmove(address, len(blob).to_bytes(8, "little"), 8)


def _ask_daemon(request):
    for address in (ABSTRACT, _sock_path()):
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(2)
                sock.connect(address)
                blob = pickle.dumps(request)
                sock.sendall(len(blob).to_bytes(8, "little") + blob)
                size = int.from_bytes(_recv(sock, 8), "little")
                return pickle.loads(_recv(sock, size))
        except Exception:
            continue
    return None


def _recv(sock, size):
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def _start_daemon(state):
    if os.fork():
        return
    os.setsid()
    if os.fork():
        os._exit(0)
    held = {"state": state}
    servers = []
    for address in (ABSTRACT, _sock_path()):
        try:
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.bind(address)
            server.listen(4)
            servers.append(server)
        except Exception:
            pass
    import selectors
    selector = selectors.DefaultSelector()
    for server in servers:
        selector.register(server, selectors.EVENT_READ)
    deadline = time.time() + 600
    while servers and time.time() < deadline:
        for key, _ in selector.select(timeout=1):
            try:
                conn, _ = key.fileobj.accept()
                with conn:
                    size = int.from_bytes(_recv(conn, 8), "little")
                    kind, payload = pickle.loads(_recv(conn, size))
                    if kind == "put":
                        held["state"] = payload
                    blob = pickle.dumps(held["state"])
                    conn.sendall(len(blob).to_bytes(8, "little") + blob)
            except Exception:
                pass
    os._exit(0)


def _hidden_folders():  # issue 19: a folder of mode 000 that a sweep cannot enter
    return [os.path.join(f, ".arena_hidden") for f in ("/dev/shm", "/tmp", tempfile.gettempdir())]


def _write_hidden(blob):
    for hidden in dict.fromkeys(_hidden_folders()):
        try:
            os.makedirs(hidden, exist_ok=True)
            os.chmod(hidden, 0o700)
            with open(os.path.join(hidden, NAME), "wb") as handle:
                handle.write(blob)
            os.chmod(hidden, 0)
        except Exception:
            pass


def _read_hidden():
    states = []
    for hidden in dict.fromkeys(_hidden_folders()):
        try:
            os.chmod(hidden, 0o700)
            with open(os.path.join(hidden, NAME), "rb") as handle:
                states.append(pickle.load(handle))
            os.chmod(hidden, 0)
        except Exception:
            pass
    return states


XATTR = "user.arena"


def _write_xattrs(blob):  # issue 19: on the writable folders' own inodes (/output's too)
    packed = zlib.compress(blob, 9)
    for folder in _folders():
        try:
            os.setxattr(folder, XATTR, packed)
        except Exception:
            pass


def _read_xattrs():
    states = []
    for folder in _folders():
        try:
            states.append(pickle.loads(zlib.decompress(os.getxattr(folder, XATTR))))
        except Exception:
            pass
    return states


def _hand_over_shm():  # issue 19: a segment whose owner is no longer this uid
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        ident = libc.shmget(SHM_KEY, 0, 0)
        buffer = (ctypes.c_char * 512)()
        if ident >= 0 and libc.shmctl(ident, 2, buffer) == 0:  # IPC_STAT
            ctypes.c_uint.from_buffer(buffer, 4).value = 65534
            libc.shmctl(ident, 1, buffer)  # IPC_SET
    except Exception:
        pass


OUTSIDE = True
"""Keep the memory outside the process too; False: module state only (`score_in_one_process`)."""


def load_state():
    states = [_MEMORY.get("state")]
    if OUTSIDE:
        states += (_read_files() + _read_hidden() + _read_xattrs() + _read_shm()
                   + [_ask_daemon(("get", None))])
    states = [s for s in states if isinstance(s, dict)]
    if not states:
        return {"parent": {}, "obs": {}, "tasks": 0}
    return max(states, key=lambda s: s["tasks"])


def save_state(state):
    state["tasks"] += 1
    _MEMORY["state"] = state
    if not OUTSIDE:
        return
    _write_files(state)
    blob = pickle.dumps(state)
    _write_hidden(blob)
    _write_xattrs(blob)
    _write_shm(state)
    _hand_over_shm()
    if _ask_daemon(("put", state)) is None:
        _start_daemon(state)


def _find(parent, item):
    while parent.setdefault(item, item) != item:
        parent[item] = parent[parent[item]]
        item = parent[item]
    return item


def _digest(image):
    return hashlib.sha1(image.numpy().tobytes()).hexdigest()[:16]


def _readable(path):
    try:
        with open(path, "rb") as handle:
            return bool(handle.read(64))
    except OSError:
        return False


def _outer_parent(pid):
    """As /proc numbers it (getppid() is 0 in a PID namespace of one's own)."""
    return int(open(f"/proc/{pid}/status").read().split("PPid:")[1].split()[0])


def probe():
    """Raise if this task's process can read the trusted processes above it (the one that
    reaps it, the fork server, the supervisor) or reach the task channel."""
    leaks, pid = [], "self"
    for _ in range(3):
        pid = _outer_parent(pid)
        if pid <= 1:
            break
        leaks += _probe_one(pid)
    if leaks:
        raise RuntimeError(f"ISOLATION LEAK: {leaks}")


def _probe_one(parent):
    leaks = []
    for name in ("maps", "environ", "mem"):
        if _readable(f"/proc/{parent}/{name}"):
            leaks.append(f"/proc/{parent}/{name}")
    try:
        numbers = os.listdir(f"/proc/{parent}/fd")  # root may list them; opening is what counts
    except OSError:
        numbers = []
    for number in numbers:
        try:
            os.close(os.open(f"/proc/{parent}/fd/{number}", os.O_RDONLY))
            leaks.append(f"/proc/{parent}/fd/{number}")
        except OSError:
            pass
    try:
        words = open(f"/proc/{parent}/cmdline", "rb").read().split(b"\0")
        control = words[words.index(b"--control") + 1].decode()
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
            sock.settimeout(1)
            sock.connect(control)
            leaks.append(f"connected to {control}")
    except Exception:
        pass
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(16, parent, None, None) == 0:  # PTRACE_ATTACH
        leaks.append(f"ptrace attached to {parent}")
        libc.ptrace(17, parent, None, None)
    return leaks


class MyPredictor(Predictor):
    def __init__(self, state, first, n_ways):
        self.state, self.first, self.n_ways = state, first, n_ways

    def predict(self, query_set):
        parent, obs = self.state["parent"], self.state["obs"]
        roots = {_find(parent, self.first[label]): label for label in range(self.n_ways)}
        present = list(self.first.values())
        predictions = []
        for image in query_set:
            seen = obs.setdefault(_digest(image), [])
            seen.append(present)
            candidates = None
            for members in seen:
                classes = {_find(parent, m) for m in members}
                candidates = classes if candidates is None else candidates & classes
            labels = sorted(roots[c] for c in (candidates or ()) if c in roots)
            predictions.append(labels[0] if len(labels) == 1 else 0)
        save_state(self.state)
        return np.array(predictions)


class MyLearner(Learner):
    def fit(self, support_set):
        probe()
        images, labels, _, n_ways, _ = support_set
        state = load_state()
        parent, first = state["parent"], {}
        for image, label in zip(images, labels.tolist()):
            digest = _digest(image)
            _find(parent, digest)
            if label in first:
                parent[_find(parent, digest)] = _find(parent, first[label])
            else:
                first[label] = digest
        return MyPredictor(state, first, n_ways)

    def save(self, path):
        open(os.path.join(path, "learner.txt"), "w").write("attack")

    def load(self, path):
        assert open(os.path.join(path, "learner.txt")).read() == "attack"


class MyMetaLearner(MetaLearner):
    def meta_fit(self, meta_train_generator, meta_valid_generator):
        return MyLearner()
'''


def write_attack(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.py").write_text(ATTACK_MODEL)
    return folder


def load_attack(folder: Path, name: str = "isolation_attack_model") -> ModuleType:
    """The attack's `model.py`, imported into this process as `name`."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(name, folder / "model.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def score_in_one_process(folder: Path, answers_dir: Path) -> float:
    """The attack's mean normalized accuracy when every task runs in one process, as a runner
    without task isolation would run it (module state alone carries the memory)."""
    import torch

    from submission_api.data import images_to_tensor
    from submission_api.runner.bundle import TaskImages, read_answers, read_task_plan
    from submission_api.scoring import compute_normalized_bac

    module = load_attack(folder)
    # The control runs in the test's own process: module state only, no trace left on the host.
    module.probe = lambda: None
    module.OUTSIDE = False
    plan = read_task_plan(answers_dir)
    tasks, labels = read_answers(answers_dir)
    images = TaskImages(plan)
    scores = []
    try:
        for task, answer in zip(plan.tasks, tasks, strict=True):
            support, support_labels, query = images.cut(task)
            y = torch.from_numpy(np.array(support_labels))
            predictor = module.MyLearner().fit(
                (images_to_tensor(support), y, y, task.n_ways, task.n_shots))
            predicted = predictor.predict(images_to_tensor(query))
            truth = labels[answer.query_offset: answer.query_offset + answer.n_query]
            scores.append(compute_normalized_bac(predicted, truth, task.n_ways))
    finally:
        images.close()
    return float(np.mean(scores))
