"""What no honest form field holds (issue 33.10): NUL and other control characters but tab and
line breaks, lone surrogates, and U+FFFD, which is what bytes that are not UTF-8 decode to. The
web forms (server/web/rendering.py, URL-encoded) and the multipart uploads (core/multipart.py)
refuse such a field with a clear 422 before it reaches a service or the database (Postgres
refuses NUL in text, which surfaced as a 500 or as a misleading DataError)."""

from __future__ import annotations

import re

from server.core.errors import InvalidInputError

BAD_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffd\ud800-\udfff]")


def check_field_text(name: str, value: object) -> None:
    """Raise InvalidInputError (`form.bad_bytes`) when field `name` or its text value holds a
    character of BAD_CHARS (file parts are not text and pass)."""
    for text in (name, value):
        if isinstance(text, str) and (bad := BAD_CHARS.search(text)):
            raise InvalidInputError(
                f"the form field {name[:40]!r} holds the character U+{ord(bad.group()):04X}, "
                "which no form sends (a control character, or bytes that are not UTF-8); "
                "reload the page and type the value again", code="form.bad_bytes")
