"""The method a submission implements (issue 23): a name shown on the leaderboard, a short
description and an optional link to its code, as its owner gives them with the upload (web
form fields or `arena submit --method … --description … --code-url …`). Checked before the
upload is registered (bad input loses nothing), then stored with the submission in the
transaction that registers it (services/upload.py): never one without the other."""

from __future__ import annotations

import re
from dataclasses import dataclass

from server.core.errors import InvalidInputError

URL = re.compile(r"^https?://[^\s<>\"']{1,490}$")


@dataclass(frozen=True)
class Method:
    name: str = ""
    description: str = ""
    code_url: str | None = None


def check_method(fields: dict[str, str]) -> Method:
    """The method from an upload's text fields; raises InvalidInputError saying what is wrong."""
    name = " ".join(str(fields.get("method", "")).split())
    description = str(fields.get("description", "")).strip()
    code_url = str(fields.get("code_url", "")).strip() or None
    if len(name) > 100:
        raise InvalidInputError(f"the method name has {len(name)} characters; keep it to 100 "
                                "(it is shown on the leaderboard)", code="method.name_too_long")
    if len(description) > 2000:
        raise InvalidInputError(f"the method description has {len(description)} characters; "
                                "keep it to 2000", code="method.description_too_long")
    if code_url is not None and not URL.match(code_url):
        raise InvalidInputError(f"the code link {code_url[:80]!r} is not an http(s) URL; give "
                                "one like https://github.com/you/repo", code="method.bad_url")
    return Method(name, description, code_url)
