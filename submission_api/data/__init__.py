"""Meta-Album data: reading and checking datasets and collections, importing them, and the
compiled content-addressed cache that tasks are cut from (contracts in docs/internals.md)."""

from typing import TYPE_CHECKING, Any

from submission_api.data.archive import extract_zip_safely
from submission_api.data.checks import (
    DEFAULT_MIN_IMAGES_PER_CLASS,
    check_collection,
    check_dataset,
    check_path,
)
from submission_api.data.collection import Collection, load_collection
from submission_api.data.compiled import (
    CompiledDataError,
    CompiledDataset,
    open_compiled,
    verify_compiled,
)
from submission_api.data.compiler import compile_dataset
from submission_api.data.importing import import_dataset
from submission_api.data.metaalbum import read_splits
from submission_api.data.problems import DataProblemsError, Problem
from submission_api.data.subset import write_compiled_subset

if TYPE_CHECKING:
    from submission_api.data.tensors import images_to_tensor

__all__ = [
    "DEFAULT_MIN_IMAGES_PER_CLASS",
    "Collection",
    "CompiledDataError",
    "CompiledDataset",
    "DataProblemsError",
    "Problem",
    "check_collection",
    "check_dataset",
    "check_path",
    "compile_dataset",
    "extract_zip_safely",
    "images_to_tensor",
    "import_dataset",
    "load_collection",
    "open_compiled",
    "read_splits",
    "verify_compiled",
    "write_compiled_subset",
]


def __getattr__(name: str) -> Any:
    """`images_to_tensor` on first use: it imports torch, which the trusted side never needs."""
    if name == "images_to_tensor":
        from submission_api.data.tensors import images_to_tensor

        return images_to_tensor
    raise AttributeError(f"module 'submission_api.data' has no attribute {name!r}")
