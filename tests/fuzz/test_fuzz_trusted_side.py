"""Property-based: what participant code shapes reaches the trusted side and always ends in a
verdict, never an exception (issue 21, principle 1). Three surfaces:
- output trees: any depth, width, names (any bytes a filename may hold), links (to folders,
  to outside, to themselves), fifos — measured, copied out and removed without raising;
- frames on the task socket: any bytes, any header JSON — refused as `ChannelError` or read;
- status.json: any bytes — a `ParticipantFailure` with a message, and text that is storable.
"""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from submission_api.contract.record import ResultRecord
from submission_api.contract.verdict import VerdictKind, decide_verdict
from submission_api.runner.channel import ChannelError, receive_message
from submission_api.runner.scorer import read_reported_status
from submission_api.storable_text import storable_text
from worker.output_walk import TOO_BIG, compute_usage, copy_regular_tree, remove_tree

EXAMPLES = int(os.environ.get("ARENA_FUZZ_EXAMPLES", "60"))
CHAIN = b"d"
"""The name of `chain`'s nested folders: generated top-level names must not take it."""
NAMES = st.binary(min_size=1, max_size=40).map(
    lambda b: b.replace(b"/", b"_").replace(b"\x00", b"_")).filter(
        lambda b: b not in (b".", b"..", CHAIN))
NODE = st.recursive(
    st.one_of(st.tuples(st.just("file"), st.binary(max_size=64)),
              st.tuples(st.just("link"), st.sampled_from([b"/", b"..", b"../../..", b"x",
                                                          b"/etc/passwd"])),
              st.tuples(st.just("fifo"), st.none())),
    lambda children: st.tuples(st.just("dir"), st.dictionaries(NAMES, children, max_size=4)),
    max_leaves=20)


def build(root: bytes, node: tuple) -> None:
    kind, value = node
    if kind == "dir":
        os.mkdir(root)
        for name, child in value.items():
            build(root + b"/" + name, child)
    elif kind == "file":
        with open(root, "wb") as handle:
            handle.write(value)
    elif kind == "link":
        os.symlink(value, root)
    else:
        os.mkfifo(root)


def chain(root: bytes, depth: int) -> None:
    fd = os.open(root, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir(CHAIN, dir_fd=fd)
        child = os.open(CHAIN, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(fd)


@settings(max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(tree=st.dictionaries(NAMES, NODE, max_size=6), depth=st.sampled_from([0, 10, 70, 1_200]))
def test_any_output_tree_is_measured_copied_and_removed_without_raising(tree, depth):
    tmp = tempfile.mkdtemp()
    try:
        out = os.fsencode(tmp) + b"/out"
        build(out, ("dir", tree))
        chain(out, depth)
        usage = compute_usage(Path(os.fsdecode(out)))
        assert usage == TOO_BIG if depth > 64 else 0 <= usage < TOO_BIG
        if usage < TOO_BIG:
            copy_regular_tree(Path(os.fsdecode(out)), Path(tmp) / "copy", 1 << 20)
            assert not any(p.is_symlink() for p in (Path(tmp) / "copy").rglob("*"))
        remove_tree(Path(os.fsdecode(out)))
        assert not os.path.lexists(out)
    finally:
        remove_tree(Path(tmp))  # never shutil.rmtree: it recurses on a deep tree


HEADERS = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True),
              st.text(max_size=20)),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.sampled_from(["arrays", "shape", "dtype", "x"]),
                                            inner, max_size=4)), max_leaves=12)


def frame_bytes(draw_header: bytes, tail: bytes) -> bytes:
    return len(draw_header).to_bytes(4, "big") + draw_header + tail


@settings(max_examples=EXAMPLES * 3, deadline=None)
@given(data=st.one_of(
    st.binary(max_size=200),
    st.builds(lambda h, t: frame_bytes(repr(h).encode(), t), HEADERS, st.binary(max_size=64)),
    st.builds(lambda h, t: frame_bytes(__import__("json").dumps(h).encode(), t), HEADERS,
              st.binary(max_size=64)),
    st.builds(lambda n, t: frame_bytes(b"[" * n + b"]" * n, t),
              st.integers(min_value=1, max_value=30_000), st.binary(max_size=8)),
))
def test_any_frame_from_a_task_is_read_or_refused_as_a_channel_error(data):
    left, right = socket.socketpair()
    try:
        left.sendall(data)
        left.shutdown(socket.SHUT_WR)
        try:
            header, arrays = receive_message(right, max_payload_bytes=1 << 16, deadline=None)
        except ChannelError:
            return
        assert isinstance(header, dict) and isinstance(arrays, list)
    finally:
        left.close()
        right.close()


@settings(max_examples=EXAMPLES * 3, deadline=None)
@given(content=st.one_of(
    st.binary(max_size=300),
    st.text(max_size=100).map(lambda t: ('{"stage": "meta_fit", "error": "' + t + '"}').encode(
        "utf-8", "surrogatepass")),
    st.just(b'{"stage": "meta_fit", "error": "\\ud800\\u0000"}'),
    st.integers(1, 30_000).map(lambda n: b"[" * n + b"]" * n),
))
def test_any_status_json_is_a_participant_failure_with_storable_text(content):
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "status.json").write_bytes(content)
        verdict = decide_verdict(ResultRecord(exit_code=1,
                                              status=read_reported_status(Path(tmp))))
        assert verdict.kind is not VerdictKind.PLATFORM and verdict.message
        storable = storable_text(verdict.full_message())
        assert "\x00" not in storable
        assert not any(0xD800 <= ord(c) <= 0xDFFF for c in storable)
