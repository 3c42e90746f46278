"""The wire format between the trusted side and one test task's process: a JSON header followed by
raw numpy arrays, over a unix stream socket that exists for that task alone.

The receiver never trusts the peer: the header is bounded, each array's dtype must be a plain
number type (no objects, no pickles), and the total payload is bounded before a byte of it is
read, so a hostile peer can neither make the trusted side allocate without limit nor run code.
Receiving is total: whatever bytes arrive end in a message or a `ChannelError` (a huge integer,
JSON nested past the parser's depth, a dimension numpy cannot allocate: all `MalformedMessage`),
never in another exception that would stop the trusted thread reading them.
Control messages (trusted side <-> supervisor) are single datagrams on a SOCK_SEQPACKET socket,
some carrying the task's socket as an SCM_RIGHTS file descriptor.

A test task's images go the other way in a sealed memory file (`seal`, `send_sealed`,
`receive_sealed`): the trusted side writes them into a `memfd` ahead of the task, seals it
against writing, growing, shrinking and further sealing, and sends its descriptor with the
task's header. The task's process maps it read-only (or copy-on-write): no copy through the
socket, and nothing it does to the file can change it or grow it (its pages are charged to the
trusted side, which wrote them). A file the trusted side reuses from task to task is sealed
against every holder's writes but its own mapping's (`REUSED_SEALS`, `runner/task_files.py`).
The receiver refuses a file that is not sealed so, or whose size or arrays disagree with the
header.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import mmap
import os
import socket
import struct
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

HEADER_MAX_BYTES = 1 << 16
CONTROL_MAX_BYTES = 1 << 16
MAX_DIMENSION = 1 << 31
"""Largest length of one array axis accepted, whatever the payload bound (numpy refuses to build
an empty array `[0, 10**30]` with a ValueError, so a zero elsewhere in the shape is no excuse)."""
_LENGTH = struct.Struct("!I")


UNIX_PATH_MAX = 107
"""Longest socket path `bind`/`connect` take (`sun_path` is 108 bytes with its NUL)."""


@contextlib.contextmanager
def unix_address(path: Path) -> Iterator[str]:
    """A name of `path` short enough for a unix socket: the path itself, or, when a deep output
    folder makes it longer than the kernel takes, the same file through an open descriptor of
    its folder (`/proc/self/fd/N/name`), valid while the context lasts."""
    if len(os.fsencode(path)) <= UNIX_PATH_MAX:
        yield str(path)
        return
    folder = os.open(path.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{folder}/{path.name}"
    finally:
        os.close(folder)


class ChannelError(Exception):
    """The peer sent nothing, or not all of it, before the deadline or the end of the stream."""


class MalformedMessage(ChannelError):
    """The peer sent a message that breaks the format or its bounds."""


def parse_json(blob: bytes | bytearray, what: str) -> Any:
    """JSON from untrusted bytes, or MalformedMessage (bad UTF-8, an integer of more digits than
    Python converts, nesting past the parser's recursion limit, ...)."""
    try:
        return json.loads(blob)
    except (ValueError, RecursionError, MemoryError) as error:
        raise MalformedMessage(f"{what} is not acceptable JSON: "
                               f"{type(error).__name__}: {str(error)[:200]}") from None


def _check_shape(shape: object) -> tuple[int, ...]:
    if (not isinstance(shape, list) or len(shape) > 8
            or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape)):
        raise MalformedMessage(f"array shape {_show(shape)}; expected at most 8 non-negative ints")
    if not all(0 <= d <= MAX_DIMENSION for d in shape):
        raise MalformedMessage(f"array shape {_show(shape)}; expected at most 8 non-negative ints "
                               f"of at most {MAX_DIMENSION}")
    return tuple(shape)


def _show(value: object) -> str:
    """A bounded rendering of an untrusted value for a message (str of a 10**400 is slow)."""
    try:
        text = json.dumps(value)
    except (ValueError, RecursionError, TypeError):
        text = type(value).__name__
    return text if len(text) <= 80 else f"{text[:77]}..."


def _check_dtype(spec: object) -> np.dtype:
    try:
        dtype = np.dtype(str(spec)[:32])
    except (TypeError, ValueError, SyntaxError) as error:
        raise MalformedMessage(f"array dtype {_show(spec)} is not a numpy dtype") from error
    if dtype.kind not in "biuf" or dtype.hasobject or dtype.itemsize > 8 or dtype.fields:
        raise MalformedMessage(f"array dtype {dtype} is not allowed; expected a plain integer, "
                           "boolean or float type")
    return dtype


def send_message(sock: socket.socket, header: dict[str, Any],
                 arrays: Sequence[np.ndarray] = ()) -> None:
    """Send `header` and `arrays` (each sent as its C-ordered bytes)."""
    arrays = [np.ascontiguousarray(a) for a in arrays]
    meta = {**header, "arrays": [{"dtype": a.dtype.str, "shape": list(a.shape)} for a in arrays]}
    blob = json.dumps(meta).encode()
    if len(blob) > HEADER_MAX_BYTES:
        raise ChannelError(f"message header of {len(blob)} bytes; at most {HEADER_MAX_BYTES}")
    sock.sendall(_LENGTH.pack(len(blob)) + blob)
    for array in arrays:
        if array.nbytes:
            sock.sendall(array.data.cast("B"))


def _recv_into(sock: socket.socket, view: memoryview, deadline: float | None) -> None:
    got = 0
    while got < len(view):
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ChannelError("no complete message before the deadline")
            sock.settimeout(remaining)
        try:
            n = sock.recv_into(view[got:])
        except TimeoutError as error:
            raise ChannelError("no complete message before the deadline") from error
        if n == 0:
            raise ChannelError("the peer closed the connection in the middle of a message"
                               if got else "the peer closed the connection")
        got += n


def _receive_header(sock: socket.socket, deadline: float | None,
                    first: Callable[[memoryview], None] | None = None) -> dict[str, Any]:
    """The length-prefixed JSON header of a message (`first` reads the length's bytes, for a
    caller that takes descriptors with them)."""
    length = bytearray(_LENGTH.size)
    (first or (lambda view: _recv_into(sock, view, deadline)))(memoryview(length))
    (size,) = _LENGTH.unpack(length)
    if size > HEADER_MAX_BYTES:
        raise MalformedMessage(f"message header of {size} bytes; at most {HEADER_MAX_BYTES}")
    blob = bytearray(size)
    _recv_into(sock, memoryview(blob), deadline)
    header = parse_json(blob, "message header")
    if not isinstance(header, dict) or not isinstance(header.get("arrays", []), list):
        raise MalformedMessage("message header is not a JSON object with an 'arrays' list")
    return header


def _check_arrays(specs: object, max_payload_bytes: int) -> list[tuple[np.dtype, tuple[int, ...],
                                                                      dict[str, Any]]]:
    """Each array description's dtype and shape, checked, with the payload bounded."""
    if not isinstance(specs, list):
        raise MalformedMessage(f"array descriptions {_show(specs)}; expected a list")
    checked = []
    total = 0
    for spec in specs:
        if not isinstance(spec, dict) or not isinstance(spec.get("shape"), list):
            raise MalformedMessage(f"array description {_show(spec)}; expected dtype and shape")
        shape = _check_shape(spec["shape"])
        dtype = _check_dtype(spec.get("dtype"))
        count = 1
        for dim in shape:  # Python integers: no float overflow, and bounded by MAX_DIMENSION
            count *= dim
        total += count * dtype.itemsize
        if total > max_payload_bytes:
            raise MalformedMessage(f"message payload over {max_payload_bytes} bytes "
                                   f"(an array of shape {list(shape)} and dtype {dtype})")
        checked.append((dtype, shape, spec))
    return checked


def receive_message(sock: socket.socket, max_payload_bytes: int,
                    deadline: float | None = None) -> tuple[dict[str, Any], list[np.ndarray]]:
    """Receive one message: its header and arrays.

    Raises:
        ChannelError: EOF, deadline passed, header or payload out of bounds, bad dtype or shape.
    """
    header = _receive_header(sock, deadline)
    specs = _check_arrays(header.pop("arrays", []), max_payload_bytes)
    arrays = []
    for dtype, shape, _ in specs:
        array = np.empty(shape, dtype=dtype)
        if array.nbytes:
            _recv_into(sock, array.data.cast("B"), deadline)
        arrays.append(array)
    return header, arrays


SEALS = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL
"""What a task's memory file must be sealed against before it leaves the trusted side."""
F_SEAL_FUTURE_WRITE = getattr(fcntl, "F_SEAL_FUTURE_WRITE", 0x0010)  # Linux >= 5.1
REUSED_SEALS = F_SEAL_FUTURE_WRITE | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL
"""Or this, for a file the trusted side reuses from task to task (`runner/task_files.py`): no
holder but the mapping the trusted side made before sealing can write it."""
_ALIGN = 64


@dataclass
class SealedArrays:
    """Arrays in a sealed memory file: its descriptor (ours until closed) and their layout."""

    fd: int
    size: int
    layout: list[dict[str, Any]]

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def layout_of(specs: Sequence[tuple[np.dtype | type, tuple[int, ...]]]
              ) -> tuple[list[dict[str, Any]], int]:
    """Where arrays of these dtypes and shapes lie in a file, one after the other (aligned),
    and the file's size."""
    layout: list[dict[str, Any]] = []
    size = 0
    for spec_dtype, shape in specs:
        dtype = np.dtype(spec_dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        layout.append({"dtype": dtype.str, "shape": list(shape), "offset": size})
        size += -(-nbytes // _ALIGN) * _ALIGN
    return layout, size


def seal(specs: Sequence[tuple[np.dtype | type, tuple[int, ...]]],
         fill: Callable[[list[np.ndarray]], None]) -> SealedArrays:
    """A memory file holding arrays of these dtypes and shapes, written by `fill` (given
    writable views of them), then sealed (`SEALS`)."""
    layout, size = layout_of(specs)
    fd = os.memfd_create("arena-task", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        if size:
            os.ftruncate(fd, size)
            with mmap.mmap(fd, size) as mapped:
                views = [np.ndarray(tuple(e["shape"]), dtype=np.dtype(e["dtype"]),
                                    buffer=mapped, offset=e["offset"]) for e in layout]
                fill(views)
                del views  # a writable mapping must be gone before the write seal
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SEALS)
    except BaseException:
        os.close(fd)
        raise
    return SealedArrays(fd, size, layout)


def send_sealed(sock: socket.socket, header: dict[str, Any], sealed: SealedArrays) -> None:
    """Send `header` with the sealed file's descriptor and layout (the descriptor stays ours)."""
    blob = json.dumps({**header, "sealed": {"size": sealed.size, "arrays": sealed.layout}}
                      ).encode()
    if len(blob) > HEADER_MAX_BYTES:
        raise ChannelError(f"message header of {len(blob)} bytes; at most {HEADER_MAX_BYTES}")
    frame = _LENGTH.pack(len(blob)) + blob
    sent = socket.send_fds(sock, [frame], [sealed.fd])
    if sent < len(frame):
        sock.sendall(frame[sent:])


def receive_sealed(sock: socket.socket, max_payload_bytes: int, deadline: float | None = None,
                   writable: bool = False) -> tuple[dict[str, Any], list[np.ndarray]]:
    """Receive a header and the sealed file sent with it; its arrays, mapped read-only, or
    `writable` copy-on-write (what the receiver writes goes to pages of its own).

    Raises:
        ChannelError: EOF, deadline passed, or a file that is not sealed, not of the header's
            size, or does not hold the arrays the header describes.
    """
    fds: list[int] = []

    def first(view: memoryview) -> None:  # the descriptor arrives with the frame's first byte
        if deadline is not None:
            sock.settimeout(max(0.001, deadline - time.monotonic()))
        try:
            data, got, _flags, _addr = socket.recv_fds(sock, len(view), 1)
        except TimeoutError as error:
            raise ChannelError("no complete message before the deadline") from error
        fds.extend(got)
        if not data:
            raise ChannelError("the peer closed the connection")
        view[: len(data)] = data
        if len(data) < len(view):
            _recv_into(sock, view[len(data):], deadline)

    try:
        header = _receive_header(sock, deadline, first)
        if len(fds) != 1:
            raise MalformedMessage(f"{len(fds)} descriptors came with the task; expected its "
                                   "sealed file")
        return header, _map_sealed(fds[0], header.pop("sealed", None), max_payload_bytes,
                                   writable)
    finally:
        for fd in fds:
            os.close(fd)  # the mapping holds the file


def _map_sealed(fd: int, sealed: object, max_payload_bytes: int,
                writable: bool = False) -> list[np.ndarray]:
    if not isinstance(sealed, dict) or not isinstance(sealed.get("size"), int):
        raise MalformedMessage(f"sealed file description {_show(sealed)}; expected size, arrays")
    seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    if seals & SEALS != SEALS and seals & REUSED_SEALS != REUSED_SEALS:
        raise MalformedMessage(f"the task's file is not sealed (seals {seals:#x}, expected "
                               f"{SEALS:#x} or {REUSED_SEALS:#x})")
    size = os.fstat(fd).st_size
    if size != sealed["size"] or size > max_payload_bytes:
        raise MalformedMessage(f"the task's file holds {size} bytes; the header says "
                               f"{sealed['size']}, at most {max_payload_bytes}")
    mapped: mmap.mmap | bytes = b""
    if size:
        mapped = (mmap.mmap(fd, size, access=mmap.ACCESS_COPY) if writable
                  else mmap.mmap(fd, size, prot=mmap.PROT_READ))
    arrays = []
    for dtype, shape, spec in _check_arrays(sealed.get("arrays"), max_payload_bytes):
        offset = spec.get("offset")
        count = 1
        for dim in shape:
            count *= dim
        if (not isinstance(offset, int) or isinstance(offset, bool) or offset < 0
                or offset + count * dtype.itemsize > size):
            raise MalformedMessage(f"array at offset {_show(offset)} of shape {list(shape)} "
                                   f"and dtype {dtype} lies outside the {size}-byte file")
        arrays.append(np.ndarray(shape, dtype=dtype, buffer=mapped, offset=offset)
                      if count else np.empty(shape, dtype=dtype))
    return arrays


def send_control(sock: socket.socket, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
    """Send one control datagram, with file descriptors attached when given."""
    blob = json.dumps(message).encode()
    if fds:
        socket.send_fds(sock, [blob], list(fds))
    else:
        sock.send(blob)


def receive_control(sock: socket.socket, deadline: float | None = None,
                    max_fds: int = 0) -> tuple[dict[str, Any], list[int]]:
    """Receive one control datagram and any attached descriptors.

    Raises:
        ChannelError: EOF, deadline passed or a malformed message.
    """
    if deadline is not None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ChannelError("no control message before the deadline")
        sock.settimeout(remaining)
    try:
        blob, fds, _flags, _addr = socket.recv_fds(sock, CONTROL_MAX_BYTES, max(max_fds, 1))
    except TimeoutError as error:
        raise ChannelError("no control message before the deadline") from error
    if max_fds == 0:
        for fd in fds:  # nobody may smuggle descriptors to a side that expects none
            socket.close(fd)
        fds = []
    if not blob:
        raise ChannelError("the peer closed the control connection")
    message = parse_json(blob, "control message")
    if not isinstance(message, dict):
        raise ChannelError("control message is not a JSON object")
    return message, list(fds)
