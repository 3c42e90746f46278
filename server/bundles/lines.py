"""YAML with line numbers: load a document with the safe loader and record, for every mapping
key and sequence item, the 1-based line where its value starts.

Paths are tuples of keys and indices, as pydantic reports error locations, so an error at
`("phases", 1, "quotas", "per_day")` maps to the line of that value; a location that is not in
the document (a missing field) falls back to its nearest recorded parent.

A bundle is organizer input the server parses, so the document is bounded before anything is
built from it (issue 21: a 600-byte billion-laughs bundle took 23 s and 3 GB, then 500s until
a restart): the node graph, with every alias counted as often as it is used, may hold at most
MAX_EXPANDED_NODES nodes and nest MAX_DEPTH deep; a mapping may not repeat a key (YAML says
keys are unique; last-wins hid typos); an integer has at most MAX_INT_DIGITS digits. The check
walks the graph once per node (sizes memoized), iteratively; the composer itself recurses, so
nesting beyond what it can follow is refused too, never a RecursionError.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

Path = tuple[str | int, ...]
MAX_EXPANDED_NODES = 100_000
"""Nodes of the document with aliases expanded; a large competition uses a few thousand."""
MAX_DEPTH = 64
"""Nesting of mappings and sequences; a bundle needs about six."""
MAX_INT_DIGITS = 19
"""Digits of an integer: every numeric field fits a signed 64-bit column."""


@dataclass
class LineMap:
    """Line of each path in the document (1-based)."""

    lines: dict[Path, int] = field(default_factory=dict)

    def line_of(self, path: Path) -> int:
        """The line of `path` or of its nearest recorded parent (1 for the document)."""
        for end in range(len(path), -1, -1):
            line = self.lines.get(tuple(path[:end]))
            if line is not None:
                return line
        return 1


class _Loader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no types: Any
    """The safe loader, whose impossible dates (`2022-13-45`) are YAML errors with a line,
    not a bare ValueError from `datetime` that would escape as a traceback, and which stops
    composing past MAX_DEPTH levels (issue 36: PyYAML's scanner pays for every open flow level
    on every token, so a 100 KB document of 50,000 nested `[` cost seconds of CPU before its
    refusal; bounded while composing, it reads 65 levels and stops)."""

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"the document nests deeper than {MAX_DEPTH} levels (a bundle "
                    "needs about six); flatten it", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _timestamp(loader: _Loader, node: yaml.ScalarNode) -> Any:
    try:
        return yaml.SafeLoader.construct_yaml_timestamp(loader, node)
    except ValueError as exc:
        raise yaml.constructor.ConstructorError(
            None, None, f"{node.value!r} is not a date ({exc}); expected YYYY-MM-DD or "
            "YYYY-MM-DDTHH:MM:SSZ (UTC)", node.start_mark) from exc


def _int(loader: _Loader, node: yaml.ScalarNode) -> Any:
    digits = sum(ch.isdigit() for ch in str(node.value))
    if digits > MAX_INT_DIGITS:
        raise yaml.constructor.ConstructorError(
            None, None, f"an integer of {digits} digits; at most {MAX_INT_DIGITS} are "
            "allowed — use a realistic value", node.start_mark)
    return yaml.SafeLoader.construct_yaml_int(loader, node)


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp)
_Loader.add_constructor("tag:yaml.org,2002:int", _int)


def load_with_lines(text: str) -> tuple[Any, LineMap]:
    """Parse one YAML document; raises yaml.YAMLError (with its own mark) on bad syntax or an
    impossible date."""
    loader = _Loader(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError as exc:
            raise yaml.YAMLError(f"the document nests too deeply to read; at most {MAX_DEPTH} "
                                 "levels are allowed") from exc
        if node is not None:
            check_document_shape(node)
        data = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    line_map = LineMap()
    if node is not None:
        _walk(node, (), line_map)
    return data, line_map


def _walk(node: yaml.Node, path: Path, line_map: LineMap) -> None:
    line_map.lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key_path = (*path, str(key_node.value))
                _walk(value_node, key_path, line_map)
                line_map.lines[key_path] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, (*path, index), line_map)


def check_document_shape(root: yaml.Node) -> None:
    """Raise yaml.YAMLError (with a mark) for a document over its bounds (module docstring).

    Iterative; each distinct node is visited once, its expanded size memoized, so an alias
    bomb costs the check only its own few nodes.
    """
    sizes: dict[int, int] = {}
    depth_of: dict[int, int] = {id(root): 1}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if not children_done:
            depth = depth_of[id(node)]
            if depth > MAX_DEPTH:
                raise _shape_error(node, f"it nests deeper than {MAX_DEPTH} levels")
            _check_unique_keys(node)
            stack.append((node, True))
            for child in children:
                if id(child) not in sizes:
                    depth_of[id(child)] = max(depth_of.get(id(child), 0), depth + 1)
                    stack.append((child, False))
            continue
        sizes[id(node)] = 1 + sum(sizes.get(id(child), 1) for child in children)
        if sizes[id(node)] > MAX_EXPANDED_NODES:
            raise _shape_error(node, f"with its aliases expanded it holds more than "
                               f"{MAX_EXPANDED_NODES} values (an alias bomb?)")


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _check_unique_keys(node: yaml.Node) -> None:
    if not isinstance(node, yaml.MappingNode):
        return
    seen: dict[str, int] = {}
    for key_node, _value in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.value == "<<":
            continue
        line = key_node.start_mark.line + 1
        if key_node.value in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"the key {key_node.value!r} appears twice in one mapping (first on "
                f"line {seen[key_node.value]}); keys must be unique — keep one",
                key_node.start_mark)
        seen[key_node.value] = line


def _shape_error(node: yaml.Node, why: str) -> yaml.YAMLError:
    return yaml.constructor.ConstructorError(
        None, None, f"the document is refused: {why}; simplify it", node.start_mark)
