"""Bundle sections for participants (issue 23): the competition page's tabs (Overview, Data,
Evaluation in Markdown, and the Get-started links), the terms to accept, team rules, and a
phase's fact-sheet questions. Kept apart from schema.py, which owns how phases evaluate.

```yaml
terms: |                       # Markdown; when set, participants accept it before submitting
  You may not share the test data.
tabs:
  overview: "…"                # Markdown, one page per tab (sanitized like every page)
  data: "…"
  evaluation: "…"
  starting_kit: https://…/starting_kit.zip   # links in the Get-started box
  sample_data: https://…/sample_data.zip
teams: {allowed: true, max_size: 4, lock_at: 2022-09-01T00:00:00Z}
phases:
  - name: final
    factsheet:
      - {key: method, label: "Describe your method", kind: text, required: true}
      - {key: pretrained, label: "Pre-trained weights?", kind: choice, choices: [yes, no]}
```
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# A Get-started link: an absolute https:// URL, or a path on this platform that starts with one
# "/" (never "//host" or "/\\host", which browsers open on another host: issue 33.13).
URL = r"^https://[^\s/\\][^\s\\]*$|^/(?![/\\])[^\s\\]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TabsSpec(_Strict):
    overview: str = ""
    data: str = ""
    evaluation: str = ""
    starting_kit: str | None = Field(default=None, max_length=500,
                                     description="where the starting kit downloads from")
    sample_data: str | None = Field(default=None, max_length=500,
                                    description="where the public sample data downloads from")

    @field_validator("starting_kit", "sample_data")
    @classmethod
    def _link(cls, value: str | None) -> str | None:
        if value is not None and not re.match(URL, value):
            raise ValueError(f"{value!r} is not a link participants can trust: use an https:// "
                             "URL (https://example.org/kit.zip) or a path on this platform "
                             "that starts with a single '/' (/static/kit.zip)")
        return value


class TeamsSpec(_Strict):
    allowed: bool = False
    max_size: int = Field(default=4, ge=1, le=100)
    lock_at: datetime | None = Field(default=None, description="no team changes after this")

    @field_validator("lock_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError(f"got {value.isoformat()} without a time zone; write it in UTC "
                             "like 2022-09-01T00:00:00Z")
        return value


class QuestionSpec(_Strict):
    key: str = Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=64)
    label: str = Field(min_length=1, max_length=500)
    kind: Literal["text", "choice", "number", "url"] = "text"
    required: bool = False
    choices: list[str] = []
    help: str = ""

    @model_validator(mode="after")
    def _choices(self) -> QuestionSpec:
        if self.kind == "choice" and len(self.choices) < 2:
            raise ValueError(f"question {self.key!r} is a choice with {len(self.choices)} "
                             "choices; give at least two in `choices`")
        if self.kind != "choice" and self.choices:
            raise ValueError(f"question {self.key!r} is of kind {self.kind!r} but has "
                             "`choices`; drop them or make it `kind: choice`")
        return self


def check_unique_keys(questions: list[QuestionSpec]) -> list[QuestionSpec]:
    keys = [q.key for q in questions]
    dupes = sorted({k for k in keys if keys.count(k) > 1})
    if dupes:
        raise ValueError(f"fact-sheet question keys {dupes} appear more than once")
    return questions
