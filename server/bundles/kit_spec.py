"""A bundle's `kit:` section: the files a competition adds to the starting kit and the sample
data it serves (issue 32.4). Paths are relative to the bundle file and read by the organizer's
`arena competition create|update`, which uploads them after the bundle (`services.kits` stores
them); the server keeps nothing else of the section."""

from __future__ import annotations

from pathlib import PurePosixPath

from pydantic import BaseModel, ConfigDict, Field, field_validator


class KitSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    files: list[str] = Field(default_factory=list, max_length=50, description="files or folders "
                             "(relative to the bundle) added under competition/ in the starting "
                             "kit zip, e.g. an example submission")
    sample_data: str | None = Field(default=None, description="a Meta-Album collection folder "
                                    "(relative to the bundle) served as the sample data tar")

    @field_validator("files")
    @classmethod
    def _relative_files(cls, value: list[str]) -> list[str]:
        return [_relative(v) for v in value]

    @field_validator("sample_data")
    @classmethod
    def _relative_data(cls, value: str | None) -> str | None:
        return None if value is None else _relative(value)


def _relative(path: str) -> str:
    parts = PurePosixPath(path).parts
    if not path or path.startswith("/") or ".." in parts or len(path) > 300:
        raise ValueError(f"{path!r} is not a path inside the bundle's folder; write it relative "
                         "to the bundle file, without '..'")
    return path
