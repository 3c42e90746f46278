"""Parse and check a bundle: YAML syntax, then the schema, then dataset references — every
problem reported with the line it comes from, all at once.

A data section with a local `path` needs `resolved[path]`: what `arena competition create`
learnt by compiling and registering that collection (`{"datasets": {name: hash},
"splits": {"meta-train": [...], ...}}`). Without it the server cannot know the hashes, so it
says to use the CLI or write `name@hash` references.
"""

from __future__ import annotations

import difflib
import typing
from dataclasses import dataclass
from datetime import date
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from server.bundles.lines import LineMap, Path, load_with_lines
from server.bundles.schema import NAME, SLUG, BundleSpec, DataRef, DataSpec
from server.core.errors import InvalidInputError

ROLES = (("meta_train", "meta-train"), ("meta_valid", "meta-valid"), ("meta_test", "meta-test"))


class BundleError(InvalidInputError):
    code = "bundle.invalid"


@dataclass(frozen=True)
class ParsedBundle:
    spec: BundleSpec
    lines: LineMap
    data: dict[str, dict[str, Any]]  # phase name -> PhaseData dict (refs resolved)


@dataclass(frozen=True)
class Problem:
    line: int
    where: str
    message: str

    def __str__(self) -> str:
        return f"line {self.line} ({self.where}): {self.message}"


def where(path: Path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "document"


def raise_problems(problems: list[Problem], source: str = "bundle") -> None:
    if problems:
        problems = sorted(problems, key=lambda p: p.line)
        listing = "; ".join(str(p) for p in problems)
        raise BundleError(f"the {source} has {len(problems)} problem(s): {listing}",
                          errors=[p.__dict__ for p in problems])


def parse_bundle(text: str, resolved: dict[str, Any] | None = None) -> ParsedBundle:
    """Validate a bundle's YAML text; raises BundleError listing every problem with its line."""
    try:
        raw, lines = load_with_lines(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        if isinstance(exc, yaml.constructor.ConstructorError) and exc.problem:
            raise_problems([Problem(line, "value", exc.problem)])
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise_problems([Problem(line, "syntax", f"not valid YAML: {problem}; check the "
                                "indentation, colons and quotes on this line or the one "
                                "before")])
    if not isinstance(raw, dict):
        raise_problems([Problem(1, "document", f"got a {type(raw).__name__}; expected a "
                                "mapping with slug, title and phases")])
    duplicates = _duplicate_names(raw, lines)
    try:
        spec = BundleSpec.model_validate(raw)
    except ValidationError as exc:
        # The schema's own duplicate check has no line; ours (above) names the line.
        raise_problems(duplicates + [_problem(err, lines) for err in exc.errors()
                                     if not (duplicates and err["loc"] == ()
                                             and "more than once" in err["msg"])])
    raise_problems(duplicates)
    data: dict[str, dict[str, Any]] = {}
    problems: list[Problem] = []
    for index, phase in enumerate(spec.phases):
        data[phase.name] = _resolve_data(phase.data, ("phases", index, "data"), lines,
                                         resolved or {}, problems)
    names = {p.name for p in spec.phases}
    for index, phase in enumerate(spec.phases):
        if phase.carry_from is not None and (phase.carry_from not in names
                                             or phase.carry_from == phase.name):
            path = ("phases", index, "carry_from")
            problems.append(Problem(lines.line_of(path), where(path),
                                    f"got {phase.carry_from!r}; expected another phase of "
                                    f"this bundle, one of {sorted(names - {phase.name})}"))
    raise_problems(problems)
    return ParsedBundle(spec=spec, lines=lines, data=data)


def _duplicate_names(raw: dict[str, Any], lines: LineMap) -> list[Problem]:
    """Each repeated phase or league name, at the line of its second (third…) use."""
    problems = []
    for key in ("phases", "leagues"):
        items = raw.get(key)
        seen: dict[str, int] = {}
        for index, item in enumerate(items if isinstance(items, list) else []):
            name = item.get("name") if isinstance(item, dict) else None
            if not isinstance(name, str):
                continue
            if name in seen:
                path = (key, index, "name")
                problems.append(Problem(lines.line_of(path), where(path), (
                    f"{key[:-1]} name {name!r} is already used by {key}[{seen[name]}] (line "
                    f"{lines.line_of((key, seen[name], 'name'))}); make the names unique")))
            else:
                seen[name] = index
    return problems


def _problem(err: ErrorDetails, lines: LineMap) -> Problem:
    path = tuple(err["loc"])
    received = err.get("input")
    shown = "" if isinstance(received, dict | list) or received is None else (
        f" (got {received.isoformat()})" if isinstance(received, date) else
        f" (got {received!r})")
    if err["type"] == "extra_forbidden":
        allowed = fields_at(BundleSpec, path[:-1])
        close = difflib.get_close_matches(str(path[-1]), allowed, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}?" if close else (
            f"expected one of {sorted(allowed)}" if allowed else "remove it")
        return Problem(lines.line_of(path), where(path),
                       f"unknown key {path[-1]!r}; {hint}")
    fix = PATTERN_FIXES.get((err.get("ctx") or {}).get("pattern", ""), "")
    return Problem(lines.line_of(path), where(path), f"{err['msg']}{shown}{fix}")


PATTERN_FIXES = {SLUG: "; use lowercase letters, digits and '-', starting with a letter or digit",
                 NAME: "; use letters, digits, '_', '.' and '-', starting with a letter or digit"}


def fields_at(model: type[BaseModel], path: Path) -> list[str]:
    """The keys a bundle accepts at `path` (e.g. ("phases", 0, "quotas")): the fields (and
    aliases) of the schema model found there, or [] when the path leaves the models."""
    current: Any = model
    for part in path:
        current = _model_of(current)
        if current is None:
            return []
        if isinstance(part, int):
            continue  # an item of a list: its model is the list's
        field = current.model_fields.get(str(part)) or next(
            (f for f in current.model_fields.values() if f.alias == part), None)
        if field is None:
            return []
        current = field.annotation
    current = _model_of(current)
    if current is None:
        return []
    return sorted({f.alias or name for name, f in current.model_fields.items()})


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside `annotation` (X, X | None, list[X], dict[str, X])."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def _resolve_data(spec: DataSpec, path: Path, lines: LineMap, resolved: dict[str, Any],
                  problems: list[Problem]) -> dict[str, Any]:
    """The PhaseData dict of one phase: every reference given a content hash."""
    known = resolved.get(spec.path or "", {}) if spec.path else {}
    if spec.path and not known:
        problems.append(Problem(lines.line_of((*path, "path")), where((*path, "path")),
                                f"local collection {spec.path!r} was not compiled and "
                                "registered; create the competition with `arena competition "
                                "create BUNDLE`, or reference datasets as name@hash"))
        return {}
    out: dict[str, Any] = {"collection": spec.collection}
    for role, split in ROLES:
        refs = getattr(spec, role)
        if refs is None:
            refs = [DataRef(name=n) for n in known.get("splits", {}).get(split, [])]
        out[role] = [_resolve_ref(ref, (*path, role, i), lines, known, problems)
                     for i, ref in enumerate(refs)]
    return out


def _resolve_ref(ref: DataRef, path: Path, lines: LineMap, known: dict[str, Any],
                 problems: list[Problem]) -> dict[str, str]:
    digest = ref.hash or known.get("datasets", {}).get(ref.name)
    if digest is None:
        hint = (f"{ref.name!r} is not in the collection (it has "
                f"{sorted(known.get('datasets', {}))})" if known else
                f"{ref.name!r} has no content hash; write {ref.name}@<hash> or add a local "
                "collection `path` and use `arena competition create`")
        problems.append(Problem(lines.line_of(path), where(path), hint))
        return {"name": ref.name, "content_hash": ""}
    return {"name": ref.name, "content_hash": digest}
