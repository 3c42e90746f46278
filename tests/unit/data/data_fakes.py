"""Tiny Meta-Album datasets written on the fly (a few 128x128 PNGs) for the data-layer tests.

A module of its own (not conftest) so tests import it by a name no other test folder uses."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
from PIL import Image


def write_dataset(root: Path, n_classes: int = 3, n_images: int = 4, seed: int = 0,
                  super_categories: bool = False, attributes: bool = False,
                  shuffle_rows: bool = False) -> Path:
    """Write a dataset whose image (c, j) has random pixels; returns its folder."""
    rng = np.random.default_rng(seed)
    (root / "images").mkdir(parents=True)
    rows = []
    for c in range(n_classes):
        for j in range(n_images):
            name = f"img_{c}_{j}.png"
            pixels = rng.integers(0, 256, (128, 128, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / "images" / name, compress_level=0)
            rows.append({"FILE_NAME": name, "CATEGORY": f"class_{c}",
                         "SUPER": f"super_{c % 2}", "attributes": f"a{c};b{j % 2}"})
    if shuffle_rows:
        rows = [rows[i] for i in rng.permutation(len(rows))]
    columns = ["FILE_NAME", "CATEGORY"] + (["SUPER"] if super_categories else []) + (
        ["attributes"] if attributes else [])
    with (root / "labels.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    info = {"dataset_name": root.name, "image_column_name": "FILE_NAME",
            "category_column_name": "CATEGORY"}
    if super_categories:
        info["super_category_column_name"] = "SUPER"
    (root / "info.json").write_text(json.dumps(info))
    return root


def write_collection(root: Path, train: list[str], test: list[str], **kwargs) -> Path:
    for i, name in enumerate(train + test):
        write_dataset(root / name, seed=i, **kwargs)
    (root / "info").mkdir(parents=True)
    (root / "info" / "meta_splits.txt").write_text(
        json.dumps({"meta-train": train, "meta-test": test}))
    return root
