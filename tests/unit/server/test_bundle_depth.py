"""A deeply nested bundle is refused at its 65th level, having read little more (issue 36.5:
a 100 KB bundle of 50,000 nested levels cost 8.6 s of server CPU before its 422: the composer
recursed until Python's limit while PyYAML's scanner paid for every open level per token)."""

from __future__ import annotations

import pytest
import yaml

from server.bundles.lines import MAX_DEPTH
from server.bundles.parse import BundleError, parse_bundle

DEEP = {
    "flow sequences": "slug: x\ntitle: " + "[" * 50_000 + "]" * 50_000 + "\n",
    "flow mappings": "slug: x\ntitle: " + "{a: " * 25_000 + "}" * 25_000 + "\n",
    "block sequences": "slug: x\ntitle:\n" + "- " * 50_000 + "x\n",
}


@pytest.mark.parametrize("text", DEEP.values(), ids=list(DEEP))
def test_a_deep_bundle_is_refused_at_the_depth_bound_after_reading_only_that_far(
        text: str, monkeypatch: pytest.MonkeyPatch):
    composed = []
    compose = yaml.composer.Composer.compose_node

    def counted(self, parent, index):  # noqa: ANN001, ANN202
        composed.append(1)
        return compose(self, parent, index)

    monkeypatch.setattr(yaml.composer.Composer, "compose_node", counted)
    with pytest.raises(BundleError) as error:
        parse_bundle(text)
    assert f"nests deeper than {MAX_DEPTH} levels" in str(error.value)
    assert len(composed) <= 2 * MAX_DEPTH + 4  # a few keys, then a node (and a key) a level


def test_a_bundle_at_the_depth_bound_still_parses_as_yaml():
    nested = "[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2)
    with pytest.raises(BundleError) as error:
        parse_bundle(f"slug: x\ntitle: {nested}\n")
    assert "nests deeper" not in str(error.value)  # refused by the schema, not the bound
