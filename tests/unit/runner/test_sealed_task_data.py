"""A task's images travel in a sealed memory file (`channel.seal`): what the task's process
receives is the trusted side's bytes, mapped read-only, and no holder of the file can change,
grow, shrink or unseal it (its pages are charged to the trusted side that wrote them). The
receiver refuses a file that is not sealed so, or that disagrees with its header. A file the
trusted side reuses (`runner/task_files.py`) is writable by its mapping alone, and is written
for another task only once released, never showing what an earlier task held."""

from __future__ import annotations

import errno
import fcntl
import json
import mmap
import os
import socket
import struct
from collections.abc import Iterator

import numpy as np
import pytest

from submission_api.runner.channel import (
    SEALS,
    MalformedMessage,
    SealedArrays,
    receive_sealed,
    seal,
    send_sealed,
)
from submission_api.runner.task_files import TaskFiles
from submission_api.runner.task_payloads import convert_into

SUPPORT = np.arange(2 * 128 * 128 * 3, dtype=np.uint8).reshape(2, 128, 128, 3)
LABELS = np.array([1, 0], dtype=np.int64)


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with left, right:
        yield left, right


def sealed_task() -> SealedArrays:
    def fill(views: list[np.ndarray]) -> None:
        views[0][...] = SUPPORT
        views[1][...] = LABELS

    return seal([(SUPPORT.dtype, SUPPORT.shape), (LABELS.dtype, LABELS.shape),
                 (np.dtype(np.uint8), (0, 128, 128, 3))], fill)


def test_the_task_arrives_whole_and_read_only(pair):
    sealed = sealed_task()
    send_sealed(pair[0], {"type": "task", "id": 7}, sealed)
    sealed.close()
    header, (support, labels, query) = receive_sealed(pair[1], 1 << 24)

    assert header == {"type": "task", "id": 7}
    assert np.array_equal(support, SUPPORT) and np.array_equal(labels, LABELS)
    assert query.shape == (0, 128, 128, 3)
    assert not support.flags.writeable and not labels.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        support[0, 0, 0, 0] = 9


@pytest.mark.parametrize("attempt", ["write", "grow", "shrink", "map writable", "unseal"])
def test_no_holder_of_the_file_can_change_it(attempt: str):
    sealed = sealed_task()
    fd = sealed.fd
    try:
        with pytest.raises(PermissionError) as raised:
            if attempt == "write":
                os.pwrite(fd, b"x", 0)
            elif attempt == "grow":
                os.ftruncate(fd, sealed.size + 4096)
            elif attempt == "shrink":
                os.ftruncate(fd, 0)
            elif attempt == "map writable":
                mmap.mmap(fd, sealed.size)
            else:
                fcntl.fcntl(fd, fcntl.F_ADD_SEALS, 0)
        assert raised.value.errno == errno.EPERM
        assert os.fstat(fd).st_size == sealed.size
        assert os.pread(fd, 16, 0) == SUPPORT.tobytes()[:16]
    finally:
        sealed.close()


def send_raw(sock: socket.socket, header: dict, fds: list[int]) -> None:
    blob = json.dumps(header).encode()
    socket.send_fds(sock, [struct.pack("!I", len(blob)) + blob], fds)


def unsealed(size: int) -> int:
    fd = os.memfd_create("arena-test", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, size)
    return fd


LAYOUT = [{"dtype": "|u1", "shape": [64], "offset": 0}]


@pytest.mark.parametrize("case", ["unsealed", "write seal only", "wrong size", "outside the file",
                                  "negative offset", "object dtype", "no descriptor",
                                  "no layout"])
def test_a_file_that_breaks_the_format_is_refused(pair, case: str):
    fd = unsealed(64)
    seals = {"unsealed": 0, "write seal only": fcntl.F_SEAL_WRITE}.get(case, SEALS)
    if seals:
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    layout = {"outside the file": [{"dtype": "|u1", "shape": [65], "offset": 0}],
              "negative offset": [{"dtype": "|u1", "shape": [8], "offset": -8}],
              "object dtype": [{"dtype": "|O", "shape": [8], "offset": 0}]}.get(case, LAYOUT)
    sealed = {"size": 128 if case == "wrong size" else 64, "arrays": layout}
    header = {"type": "task"} if case == "no layout" else {"type": "task", "sealed": sealed}
    try:
        send_raw(pair[0], header, [] if case == "no descriptor" else [fd])
        with pytest.raises(MalformedMessage):
            receive_sealed(pair[1], 1 << 20)
    finally:
        os.close(fd)


def test_the_received_descriptor_is_closed_whatever_happens(pair):
    fd = unsealed(64)
    before = set(os.listdir("/proc/self/fd"))
    try:
        send_raw(pair[0], {"type": "task", "sealed": {"size": 64, "arrays": LAYOUT}}, [fd])
        with pytest.raises(MalformedMessage, match="not sealed"):
            receive_sealed(pair[1], 1 << 20)
    finally:
        os.close(fd)
    assert set(os.listdir("/proc/self/fd")) <= before


# A reused task file (runner/task_files.py): written by the trusted side task after task.


def test_a_reused_file_arrives_writable_to_its_task_alone(pair):
    files = TaskFiles(1 << 16)
    try:
        sent = files.write(7, [(LABELS.dtype, LABELS.shape)],
                           lambda views: views[0].__setitem__(..., LABELS))
        send_sealed(pair[0], {"type": "task", "id": 7}, sent)
        sent.close()
        _, (labels,) = receive_sealed(pair[1], 1 << 20, writable=True)
        assert np.array_equal(labels, LABELS)
        labels[0] = 99  # the task's own copy of the page
        sent = files.write(8, [(LABELS.dtype, LABELS.shape)],
                           lambda views: views[0].__setitem__(..., LABELS + 1))
        try:
            assert np.frombuffer(os.pread(sent.fd, 16, 0), np.int64).tolist() == [2, 1]
            for attempt in (lambda: os.pwrite(sent.fd, b"x", 0),
                            lambda: os.ftruncate(sent.fd, 0),
                            lambda: mmap.mmap(sent.fd, 1 << 16),
                            lambda: fcntl.fcntl(sent.fd, fcntl.F_ADD_SEALS, 0)):
                with pytest.raises(PermissionError):
                    attempt()
        finally:
            sent.close()
    finally:
        files.close()


def test_a_file_is_written_again_only_once_its_task_is_released_and_never_shows_another_task():
    files = TaskFiles(1 << 16)
    big = np.arange(1000, dtype=np.int64)
    small = np.arange(10, dtype=np.int64) + 5000
    try:
        first = files.write(0, [(big.dtype, big.shape)], lambda v: v[0].__setitem__(..., big))
        second = files.write(1, [(small.dtype, small.shape)],
                             lambda v: v[0].__setitem__(..., small))
        assert not os.path.samestat(os.fstat(first.fd), os.fstat(second.fd))  # 0 still held
        files.release(0)
        third = files.write(2, [(small.dtype, small.shape)],
                            lambda v: v[0].__setitem__(..., small))
        assert os.path.samestat(os.fstat(first.fd), os.fstat(third.fd))  # task 0's, reused
        whole = np.frombuffer(os.pread(third.fd, 1 << 16, 0), np.int64)
        assert whole[:10].tolist() == small.tolist()
        assert not whole[10:].any(), "task 0's images past task 2's end"
        for sent in (first, second, third):
            sent.close()
    finally:
        files.close()


def test_the_trusted_side_converts_to_the_values_images_to_tensor_gives():
    from submission_api.data import images_to_tensor

    images = np.random.default_rng(0).integers(0, 256, (5, 128, 128, 3), dtype=np.uint8)
    out = np.empty((5, 3, 128, 128), np.float32)
    convert_into(images, out)
    assert out.tobytes() == images_to_tensor(images).numpy().tobytes()
