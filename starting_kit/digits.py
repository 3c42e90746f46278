"""scikit-learn's bundled handwritten digits (1797 images, 10 classes, no download) converted to
a Meta-Album dataset: small real data for tests and demos that need more than synthetic images.

The 8x8 grey images are upscaled to 128x128 RGB with bilinear interpolation, ink dark on white.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
from PIL import Image


def _load_digits() -> tuple[np.ndarray, np.ndarray]:
    try:
        from sklearn.datasets import load_digits
    except ImportError as exc:
        raise ImportError("convert_digits needs scikit-learn, which is not installed; install it "
                          "with `pip install scikit-learn` (the digits ship inside it, nothing "
                          "is downloaded).") from exc
    digits = load_digits()
    return digits.images, digits.target


def convert_digits(out_dir: Path, name: str = "digits",
                   max_per_class: int | None = None) -> Path:
    """Write the digits as a Meta-Album dataset folder `out_dir/<name>` and return it.

    Classes are "digit_0" .. "digit_9" (about 180 images each, or the first `max_per_class`);
    images are PNG files.
    """
    images, targets = _load_digits()
    if max_per_class is not None:
        keep = np.concatenate([np.flatnonzero(targets == c)[:max_per_class] for c in range(10)])
        images, targets = images[np.sort(keep)], targets[np.sort(keep)]
    root = Path(out_dir) / name
    (root / "images").mkdir(parents=True, exist_ok=True)
    grey = (255 - images * (255 / 16)).clip(0, 255).astype(np.uint8)  # 0..16 ink -> dark on white
    rows = []
    for i, (img, target) in enumerate(zip(grey, targets, strict=True)):
        fname = f"digit_{i:04d}.png"
        big = Image.fromarray(img).resize((128, 128), Image.Resampling.BILINEAR).convert("RGB")
        big.save(root / "images" / fname, compress_level=1)
        rows.append((fname, f"digit_{int(target)}"))
    with (root / "labels.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["FILE_NAME", "CATEGORY"])
        writer.writerows(rows)
    info = {"dataset_name": name, "image_column_name": "FILE_NAME",
            "category_column_name": "CATEGORY", "has_super_categories": False,
            "super_category_column_name": None,
            "dataset_description": "UCI ML hand-written digits as bundled with scikit-learn, "
                                   "upscaled from 8x8 to 128x128 RGB.",
            "license": "CC BY 4.0 (UCI Machine Learning Repository)"}
    (root / "info.json").write_text(json.dumps(info, indent=2))
    return root
