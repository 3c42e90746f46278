"""Streaming multipart reception: the upload goes to a temp file in chunks, never whole in memory.

Starlette's own form parsing would spool the whole body before our size cap could act, so the
request stream is fed to python-multipart's push parser directly: the file part is written as it
arrives (sha256 and size cap on the way), small text fields are kept with a cap of their own.

Streaming holds an upload slot (services/upload_gate.py: per user and in all, else 429/503 with
Retry-After) and nothing else: callers must not hold a database session across it, since a
client may take minutes to send. A client that sends nothing for `upload_idle_timeout_s` is
answered 408 `upload.stalled` and its partial file removed.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field

from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import Request

from server.core.errors import InvalidInputError, UploadStalledError, UploadTooLargeError
from server.core.form_text import check_field_text
from server.services.storage import Storage, StreamingFile
from server.services.upload import StagedUpload

MAX_FIELD_BYTES = 64 * 1024
_OVERHEAD = 64 * 1024  # multipart headers and text fields around the file


@dataclass
class _Receiver:
    """Callback state for one multipart body."""

    storage: Storage
    file_field: str
    max_bytes: int
    fields: dict[str, str] = field(default_factory=dict)
    file: StreamingFile | None = None
    filename: str | None = None
    _headers: dict[str, str] = field(default_factory=dict)
    _name: bytes = b""
    _value: bytes = b""
    _buffer: bytearray | None = None
    _writing_file: bool = False
    ended: bool = False
    """Set when the closing boundary arrived: a body cut before it is refused whole."""

    def on_part_begin(self) -> None:
        self._headers, self._buffer, self._writing_file = {}, None, False

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self._name += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self._value += data[start:end]

    def on_header_end(self) -> None:
        self._headers[self._name.decode("latin-1").lower()] = self._value.decode("latin-1")
        self._name, self._value = b"", b""

    def on_headers_finished(self) -> None:
        _, options = parse_options_header(self._headers.get("content-disposition", ""))
        name = options.get(b"name", b"").decode(errors="replace")  # checked at the part's end
        if name == self.file_field and b"filename" in options:
            if self.file is not None:
                raise InvalidInputError(f"more than one {self.file_field!r} part; send one file")
            self.filename = options[b"filename"].decode(errors="replace")
            self.file = StreamingFile(self.storage.tmp_path(), self.max_bytes)
            self._writing_file = True
        else:
            self._buffer = bytearray()
            self._headers["__name__"] = name
            self._headers["__file__"] = "1" if b"filename" in options else ""

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        if self._writing_file and self.file is not None:
            self.file.write(data[start:end])
        elif self._buffer is not None:
            self._buffer += data[start:end]
            if len(self._buffer) > MAX_FIELD_BYTES:
                raise InvalidInputError(f"a form field exceeds {MAX_FIELD_BYTES} bytes")

    def on_end(self) -> None:
        self.ended = True

    def on_part_end(self) -> None:
        if self._buffer is not None:
            name, value = self._headers["__name__"], self._buffer.decode(errors="replace")
            if not self._headers.get("__file__"):  # text: no NUL, controls or non-UTF-8 bytes
                check_field_text(name, value)
            self.fields[name] = value
        self._buffer, self._writing_file = None, False


async def receive_file(request: Request, storage: Storage, max_bytes: int,
                       file_field: str = "file", owner: int | None = None
                       ) -> tuple[StagedUpload, dict[str, str]]:
    """Stream a multipart/form-data body; return the staged file and the text fields.

    `owner` (the uploading user's id) counts towards that user's upload slots.
    Raises UploadTooLargeError (nothing kept), InvalidInputError for a malformed body,
    TooManyUploadsError / ServerBusyError (nothing read), UploadStalledError.
    """
    async with AsyncExitStack() as stack:
        gate = getattr(request.app.state, "upload_gate", None)
        if gate is not None:
            await stack.enter_async_context(gate.slot(owner))
        return await _receive(request, storage, max_bytes, file_field)


async def _chunks(request: Request) -> AsyncIterator[bytes]:
    """The body's chunks; UploadStalledError when the client sends nothing for too long."""
    settings = getattr(request.app.state, "settings", None)
    idle_s = getattr(settings, "upload_idle_timeout_s", None)
    stream = request.stream().__aiter__()
    while True:
        try:
            yield await asyncio.wait_for(stream.__anext__(), idle_s)
        except StopAsyncIteration:
            return
        except TimeoutError as exc:
            raise UploadStalledError(f"the upload sent nothing for {idle_s:g} s; send it again "
                                     "on a steadier connection") from exc


async def _receive(request: Request, storage: Storage, max_bytes: int,
                   file_field: str) -> tuple[StagedUpload, dict[str, str]]:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes + _OVERHEAD:
        raise UploadTooLargeError(
            f"the upload declares {declared} bytes; at most {max_bytes} are accepted — "
            "leave data and large checkpoints out of the zip", max_bytes=max_bytes)
    ctype, options = parse_options_header(request.headers.get("content-type", ""))
    if ctype != b"multipart/form-data" or b"boundary" not in options:
        raise InvalidInputError(
            f"content type {ctype.decode()!r} received; expected multipart/form-data with a "
            f"{file_field!r} file part (e.g. curl -F {file_field}=@submission.zip)")
    receiver = _Receiver(storage, file_field, max_bytes)
    callbacks = {name: getattr(receiver, name) for name in (
        "on_part_begin", "on_header_field", "on_header_value", "on_header_end",
        "on_headers_finished", "on_part_data", "on_part_end", "on_end")}
    parser = MultipartParser(options[b"boundary"], callbacks)  # type: ignore[arg-type]
    try:
        async for chunk in _chunks(request):
            parser.write(chunk)
        parser.finalize()
        if not receiver.ended:
            raise MultipartParseError("the body ends before the closing boundary "
                                      "(--boundary--): it was cut short")
    except MultipartParseError as exc:
        _discard(receiver)
        raise InvalidInputError(f"malformed multipart body ({exc}); resend the form") from exc
    except BaseException:
        _discard(receiver)
        raise
    if receiver.file is None:
        raise InvalidInputError(f"no {file_field!r} file part received; attach the zip as "
                                f"'{file_field}' (e.g. curl -F {file_field}=@submission.zip)")
    sha256 = receiver.file.finish()
    staged = StagedUpload(path=receiver.file.path, sha256=sha256, size=receiver.file.size)
    return staged, receiver.fields


def _discard(receiver: _Receiver) -> None:
    if receiver.file is not None:
        receiver.file.discard()
