"""The OpenAPI operation ids a client generator names its methods after (issue 35.5)."""

import re
from collections import Counter

from server.app import create_app
from server.core.config import Settings


def test_every_operation_id_is_tag_and_function_and_unique():
    schema = create_app(Settings(insecure_dev_secrets=True)).openapi()
    ids = [operation["operationId"] for methods in schema["paths"].values()
           for operation in methods.values()]
    assert len(ids) > 50  # the whole API, not a router that failed to mount
    assert [i for i, n in Counter(ids).items() if n > 1] == []
    wrong = [i for i in ids if not re.fullmatch(r"[a-z][a-z0-9_]*-[a-z][a-z0-9_]*", i)]
    assert wrong == []  # `<tag>-<function>`: no path or method baked in
    upload = schema["paths"]["/api/v1/phases/{phase_id}/submissions"]["post"]
    assert upload["operationId"] == "submissions-create_submission"
