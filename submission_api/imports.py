"""Which of a submission's imports the sandbox image lacks, and how to bring each one.

`arena run` imports `model.py` in the participant's own environment, where `import sklearn`
works; the sandbox image has only what scripts/build_sandbox_image.sh installs, so the same
zip fails there with `import_error`. This module reads a submission's imports statically (the
`ast` of every `.py` file, never executing it), drops the standard library, the submission's
own modules (and a bundled `vendor/` folder) and what the image holds, and says for each
remaining module which package provides it and how to ship it: a pure-Python package can be
vendored with `pip install --target vendor`; one with compiled parts must be a wheel built for
the sandbox's CPython and platform (or come with an image the organizers provide). The same
advice is what the platform's failure page shows for a missing module.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

DEFAULT_IMAGE = "metadl-arena/sandbox:cpu"
SANDBOX_PYTHON = "3.11"  # Debian 12's CPython, the offline base of the standard images
SANDBOX_PLATFORM = "manylinux2014_x86_64"
_TORCH = {"torch", "numpy", "PIL", "filelock", "typing_extensions", "sympy", "mpmath",
          "networkx", "jinja2", "markupsafe", "fsspec"}
# What the platform itself provides to every submission (the NeurIPS'22 kit's modules too).
PLATFORM_MODULES = {"submission_api", "api", "cdmetadl"}
IMAGE_MODULES: dict[str, frozenset[str]] = {
    DEFAULT_IMAGE: frozenset(_TORCH),
    "metadl-arena/sandbox:torchvision": frozenset(_TORCH | {"torchvision"}),
}
"""Top-level modules each standard image installs (scripts/build_sandbox_image.sh; torch's own
dependencies included). Another image's list is its organizers' to tell."""
PACKAGE_OF = {"sklearn": "scikit-learn", "cv2": "opencv-python-headless", "PIL": "pillow",
              "skimage": "scikit-image", "yaml": "pyyaml", "timm": "timm", "bs4": "beautifulsoup4",
              "google.protobuf": "protobuf", "attr": "attrs", "dateutil": "python-dateutil"}
COMPILED = {"sklearn", "scipy", "cv2", "pandas", "skimage", "lightgbm", "xgboost", "numba",
            "h5py", "tensorflow", "jax", "jaxlib", "faiss", "pyarrow", "tokenizers", "yaml",
            "psutil", "llvmlite", "matplotlib", "kornia_rs", "safetensors", "torchaudio",
            "torchvision"}
"""Modules whose packages ship compiled extensions (a wheel per Python and platform)."""


@dataclass(frozen=True)
class MissingModule:
    """An import the image cannot satisfy, where it is, and how to bring it."""

    module: str
    file: str
    line: int
    package: str
    compiled: bool

    def advice(self) -> str:
        """How to ship it inside the zip (one sentence and a command)."""
        return module_advice(self.module)["text"]


class ModuleAdvice(TypedDict):
    """How to bring a missing module: its package, whether it has compiled parts, the command
    that vendors it, and one sentence saying so."""

    package: str
    compiled: bool
    command: str
    text: str


def module_advice(module: str) -> ModuleAdvice:
    """`{"package", "compiled", "command", "text"}` for a module the sandbox lacks."""
    package = PACKAGE_OF.get(module, module)
    compiled = module in COMPILED
    if compiled:
        command = (f"pip install --target vendor --only-binary=:all: --platform "
                   f"{SANDBOX_PLATFORM} --python-version {SANDBOX_PYTHON} {package}")
        text = (f"{module} comes from {package}, which has compiled parts: vendor the wheel "
                f"built for the sandbox (CPython {SANDBOX_PYTHON}, Linux x86-64) with "
                f"`{command}` and put `vendor` on sys.path in model.py, or ask the organizers "
                "for an image that has it")
    else:
        command = f"pip install --target vendor {package}"
        text = (f"{module} comes from {package} (pure Python): vendor it with `{command}` in "
                "the submission folder and put `vendor` on sys.path at the top of model.py")
    return {"package": package, "compiled": compiled, "command": command, "text": text}


def find_imports(folder: Path) -> dict[str, tuple[str, int]]:
    """Top-level modules the submission's `.py` files import absolutely: module -> (file,
    line) of its first import. A file that does not parse is skipped (the run reports it)."""
    found: dict[str, tuple[str, int]] = {}
    for path in sorted(folder.rglob("*.py")):
        if "vendor" in path.relative_to(folder).parts:
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0],
                                 (str(path.relative_to(folder)), node.lineno))
    return found


def local_modules(folder: Path) -> set[str]:
    """Modules the submission brings itself: its top-level files and folders, and `vendor/`."""
    names = set()
    for base in (folder, folder / "vendor"):
        if base.is_dir():
            names |= {p.stem if p.suffix == ".py" else p.name for p in base.iterdir()
                      if p.suffix == ".py" or p.is_dir()}
    return names


def check_imports(folder: Path, image: str | None) -> list[MissingModule] | None:
    """The submission's imports that `image` (None: the default) lacks, in file order; None
    when the image's package list is unknown (then nothing can be checked)."""
    provided = IMAGE_MODULES.get(image or DEFAULT_IMAGE)
    if provided is None:
        return None
    known = set(sys.stdlib_module_names) | PLATFORM_MODULES | provided | local_modules(folder)
    missing = [MissingModule(module, file, line, PACKAGE_OF.get(module, module),
                             module in COMPILED)
               for module, (file, line) in find_imports(folder).items() if module not in known]
    return sorted(missing, key=lambda m: (m.file, m.line))
