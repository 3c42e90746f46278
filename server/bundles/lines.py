"""YAML with line numbers: load a document with the safe loader and record, for every mapping
key and sequence item, the 1-based line where its value starts.

Paths are tuples of keys and indices, as pydantic reports error locations, so an error at
`("phases", 1, "quotas", "per_day")` maps to the line of that value; a location that is not in
the document (a missing field) falls back to its nearest recorded parent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

Path = tuple[str | int, ...]


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


class _Loader(yaml.SafeLoader):
    """The safe loader, whose impossible dates (`2022-13-45`) are YAML errors with a line,
    not a bare ValueError from `datetime` that would escape as a traceback."""


def _timestamp(loader: _Loader, node: yaml.ScalarNode) -> Any:
    try:
        return yaml.SafeLoader.construct_yaml_timestamp(loader, node)
    except ValueError as exc:
        raise yaml.constructor.ConstructorError(
            None, None, f"{node.value!r} is not a date ({exc}); expected YYYY-MM-DD or "
            "YYYY-MM-DDTHH:MM:SSZ (UTC)", node.start_mark) from exc


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp)


def load_with_lines(text: str) -> tuple[Any, LineMap]:
    """Parse one YAML document; raises yaml.YAMLError (with its own mark) on bad syntax or an
    impossible date."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
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
