"""Meta-train takes the residency-oracle filter of the test tasks (issue 34): a run's meta-train
must not read what another run left in the page cache. Its participant code (here at import,
the first code of theirs that runs) gets EPERM for mincore and PR_SET_DUMPABLE, while numpy and
torch keep working."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from submission_api.runner import seccomp

pytestmark = pytest.mark.skipif(platform.machine() not in seccomp.ARCHES,
                                reason="the filter knows this architecture's numbers only")

PROBE = '''
import ctypes, errno, mmap, numpy, torch
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
fd = open(__file__, "rb").fileno()
address = libc.mmap(None, 4096, 1, 1, fd, 0)
vector = (ctypes.c_ubyte * 1)()
seen = {"mincore": libc.mincore(ctypes.c_void_p(address), 4096, vector),
        "mincore errno": errno.errorcode.get(ctypes.get_errno()),
        "dumpable": libc.prctl(4, 1, 0, 0, 0),
        "numpy": float(numpy.ones(1 << 20).sum()),
        "torch": float(torch.ones(1 << 20).sum())}
raise RuntimeError("PROBE " + repr(seen))
'''


def test_meta_train_participant_code_finds_the_oracles_refused(tmp_path: Path):
    submission, bundle, output = (tmp_path / name for name in ("submission", "bundle", "out"))
    submission.mkdir()
    bundle.mkdir()
    (submission / "model.py").write_text(PROBE)
    (bundle / "run.json").write_text(json.dumps({"participant_seed": 1, "threads": 1}))
    done = subprocess.run([sys.executable, "-m", "submission_api.runner.participant",
                           "--submission", str(submission), "--bundle", str(bundle),
                           "--output", str(output)], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 1, done.stderr[-2000:]
    status = json.loads((output / "status.json").read_text())
    assert status["stage"] == "import"
    seen = eval(status["error"].removeprefix("PROBE "))  # noqa: S307 - our probe's repr
    assert seen == {"mincore": -1, "mincore errno": "EPERM", "dumpable": -1,
                    "numpy": float(1 << 20), "torch": float(1 << 20)}
