"""Bundles that cost the server: alias bombs, huge bodies, huge integers, deep nesting,
repeated keys (issue 21). On 08e9140 a ~600-byte billion-laughs bundle took 23 s and 3 GB
then 500 (and /phases answered 500 until a restart); a 10 MB body, a 5,000-digit integer and
100,000-deep nesting were 500s; a repeated key silently took the last value. Each is now a
422 (or 413) naming what is wrong, in bounded time and memory, and nothing is stored.
"""

from __future__ import annotations

import json

import pytest

from server.bundles import BundleError, parse_bundle

LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8))
BUNDLE_HEAD = "slug: demo\ntitle: Demo\nphases:\n  - name: dev\n    status: draft\n"


def problem_text(text: str) -> str:
    with pytest.raises(BundleError) as caught:
        parse_bundle(text)
    return str(caught.value)


def test_a_billion_laughs_is_refused_before_anything_is_built():
    assert len(LAUGHS) < 700
    assert "aliases expanded" in problem_text(BUNDLE_HEAD + "extra:\n" + "  " + LAUGHS.replace(
        "\n", "\n  ").rstrip())


def test_a_few_shared_aliases_are_fine():
    text = ("slug: demo\ntitle: Demo\nphases:\n  - name: dev\n    status: &s draft\n"
            "  - name: two\n    status: *s\n")
    parse_bundle(text)  # an anchor used once or twice is ordinary YAML


@pytest.mark.parametrize("text", [
    "[" * 100_000 + "]" * 100_000,
    "a:\n" + "".join("  " * i + "- \n" for i in range(1, 3_000)),
    "{" + "a: {" * 5_000 + "}" * 5_001,
])
def test_deep_nesting_is_refused_with_a_message(text):
    assert "nest" in problem_text(text)


def test_a_huge_integer_is_refused_with_its_line():
    message = problem_text(BUNDLE_HEAD + "    runs_per_submission: " + "9" * 5_000 + "\n")
    assert "digits" in message and "line 6" in message


def test_a_repeated_key_is_refused_naming_both_lines():
    message = problem_text(BUNDLE_HEAD + "    status: open\n")
    assert "'status' appears twice" in message and "line 5" in message


def test_the_api_refuses_a_body_over_its_bound_with_413(app_env):
    env, org = app_env, app_env.token_for("olga", role="organizer")
    big = BUNDLE_HEAD + "# " + "x" * (10 * 1024**2) + "\n"
    answer = env.client.post("/api/v1/competitions/bundle", content=big,
                             headers={**org, "Content-Type": "application/yaml"})
    assert answer.status_code == 413, answer.text
    assert answer.json()["error"]["code"] == "request.too_large"


@pytest.mark.parametrize(("content", "ctype"), [
    (BUNDLE_HEAD + "x:\n  " + LAUGHS.replace("\n", "\n  "), "application/yaml"),
    ("[" * 100_000 + "]" * 100_000, "application/yaml"),
    (json.dumps({"yaml": BUNDLE_HEAD}).replace("{", "[" * 50_000 + "{", 1) + "]" * 50_000,
     "application/json"),
])
def test_the_api_answers_422_to_hostile_bundles_and_keeps_serving(app_env, content, ctype):
    env, org = app_env, app_env.token_for(f"o{len(content) % 9973}", role="organizer")
    answer = env.client.post("/api/v1/competitions/bundle", content=content,
                             headers={**org, "Content-Type": ctype})
    assert answer.status_code == 422, answer.text[:300]
    assert env.client.get("/api/v1/phases", headers=org).status_code == 200
