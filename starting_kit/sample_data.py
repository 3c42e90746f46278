"""Synthetic sample collection in Meta-Album format, so that the starting kit, the tests and the
demos run offline: five visually distinct domains (3 meta-train, 2 meta-test) plus two in no
split: "spurious", whose per-image attributes correlate with the class for FewSTAB tasks, and
"scripts", a glyph domain with enough classes for the within-domain protocol (its 70/15/15 class
split leaves 5 test classes, where a 20-class domain leaves 3: no 5-way task).

Classes are defined by a few parameters (frequency, orientation, shape, strokes, spectrum,
lattice) and every image adds nuisance variation (position, scale, rotation, colour jitter,
noise), so a small prototypical network scores well above chance yet below perfect.
Rendering is vectorized per class; the whole default collection takes a few seconds.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

SIZE = 128
META_TRAIN = ("stripes", "blobs", "glyphs")
META_TEST = ("spectra", "mosaic")
EXTRA = ("spurious", "scripts")
"""In no split: FewSTAB names "spurious"; within-domain tests every dataset able to serve it.
Appended after the split domains, so that adding one never changes another's images."""
ALL_DOMAINS = META_TRAIN + META_TEST + EXTRA
PALETTE = np.array([[.85, .2, .2], [.2, .65, .25], [.2, .35, .85], [.9, .75, .15],
                    [.6, .25, .75], [.15, .7, .75], [.5, .5, .5]])
"""Few hues shared by all classes, so colour alone never identifies a class."""
SHAPES = ("ellipse", "polygon", "star", "ring", "cross")
LATTICES = ("checker", "dots", "grid", "zigzag")
ATTRIBUTE_VALUES = {"background": ("red", "green", "blue", "gray"),
                    "border": ("none", "thin", "thick"),
                    "mark": ("none", "top-left", "bottom-right")}
WITHIN_DOMAIN_MIN_CLASSES = 34
"""Classes of "scripts" (more when n_classes is larger): the NeurIPS'21 70/15/15 split of 34
classes is 24/5/5, enough for within-domain 5-way test tasks and 5-way meta-valid tasks; 30, the
bare minimum, would rest on rounding 4.5 up."""
FEWSTAB_MIN_IMAGES = 100
"""Images per class of "spurious" (more when n_images is larger). FewSTAB's reference rule
(gtzheng/FewSTAB `SpuriousTask`) asks each way for 15 query images lacking its attribute and
carrying another selected one, from a query pool disjoint from the support pool: 40-image
classes cannot give that (the reference used miniImageNet's 600 per class)."""
ATTRIBUTE_AGREEMENT = 0.75
"""Probability that an image takes its class's preferred value of an attribute (the rest random)."""

Rendered = tuple[np.ndarray, list[str], list[str] | None]
"""Images float [m, 128, 128, 3] of one class, its super-category or "", per-image attributes."""


def _grid() -> tuple[np.ndarray, np.ndarray]:
    ax = np.linspace(-1, 1, SIZE, dtype=np.float32)
    return np.meshgrid(ax, ax, indexing="xy")


def _coords(rng: np.random.Generator, m: int, shift: float, scale: tuple[float, float],
            rot: float) -> tuple[np.ndarray, np.ndarray]:
    """Per-image rotated, scaled, shifted coordinates u, v: [m, 128, 128]."""
    x, y = _grid()
    sx, sy = rng.uniform(-shift, shift, (2, m, 1, 1)).astype(np.float32)
    s = rng.uniform(*scale, (m, 1, 1)).astype(np.float32)
    a = rng.uniform(-rot, rot, (m, 1, 1)).astype(np.float32)
    return (((x - sx) * np.cos(a) + (y - sy) * np.sin(a)) / s,
            (-(x - sx) * np.sin(a) + (y - sy) * np.cos(a)) / s)


def _colours(rng: np.random.Generator, base: np.ndarray, m: int, jitter: float) -> np.ndarray:
    return np.clip(base + rng.normal(0, jitter, (m, 3)), 0, 1).astype(np.float32)[:, None, None]


def _paint(mask: np.ndarray, fg: np.ndarray, bg: np.ndarray) -> np.ndarray:
    return bg + mask[..., None] * (fg - bg)


def _soft(d: np.ndarray, edge: float = 0.03) -> np.ndarray:
    """Anti-aliased inside test: 1 where d < 0, 0 where d > 0."""
    return np.clip(0.5 - d / edge, 0, 1)


def _stripes(rng: np.random.Generator, key: int, c: int, n_classes: int, m: int) -> Rendered:
    cls = np.random.default_rng([key, c])
    freq, theta = float(np.exp(cls.uniform(np.log(2.5), np.log(12)))), cls.uniform(0, np.pi)
    fg, bg = PALETTE[cls.choice(len(PALETTE), 2, replace=False)]
    u, v = _coords(rng, m, 1.0, (0.88, 1.12), 0.15)
    u = u * np.cos(theta) + v * np.sin(theta)
    wave = np.sin(np.pi * freq * u + rng.uniform(0, 2 * np.pi, (m, 1, 1)).astype(np.float32))
    mask = 0.5 + 0.5 * (np.tanh(3 * wave) if cls.random() < 0.5 else wave)
    return _paint(mask, _colours(rng, fg, m, .12), _colours(rng, bg, m, .12)), [""] * m, None


def _shape_distance(family: str, t: float, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Signed distance-like field of a unit shape; `t` in [0, 1] is the class variant."""
    r, phi = np.hypot(u, v), np.arctan2(v, u)
    if family == "ellipse":
        return np.hypot(u, v * (1 + 1.5 * t)) - 0.5
    if family == "polygon":
        k = 3 + round(3 * t)
        return r * np.cos((phi % (2 * np.pi / k)) - np.pi / k) / np.cos(np.pi / k) - 0.5
    if family == "star":
        return r - 0.45 * (1 + 0.35 * np.cos((4 + round(3 * t)) * phi))
    if family == "ring":
        return np.abs(r - 0.42) - (0.06 + 0.12 * t)
    w = 0.08 + 0.12 * t
    return np.minimum(np.maximum(np.abs(u) - w, np.abs(v) - 0.55),
                      np.maximum(np.abs(v) - w, np.abs(u) - 0.55))


def _shape_images(rng: np.random.Generator, key: int, c: int, n_classes: int, m: int) -> Rendered:
    family, n_var = SHAPES[c % len(SHAPES)], -(-n_classes // len(SHAPES))
    t = (c // len(SHAPES)) / max(1, n_var - 1)
    fg_base, bg_base = PALETTE[np.random.default_rng([key, c]).choice(len(PALETTE), 2, False)]
    u, v = _coords(rng, m, 0.3, (0.65, 1.05), np.pi)
    fg = _colours(rng, fg_base, m, .15)
    bg = _colours(rng, 0.4 * bg_base + 0.3, m, .15)
    return _paint(_soft(_shape_distance(family, t, u, v)), fg, bg), [family] * m, None


def _glyphs(rng: np.random.Generator, key: int, c: int, n_classes: int, m: int) -> Rendered:
    family = c % 5
    base = np.random.default_rng([key, 10_000 + family]).uniform(-.6, .6, (2, 2, 2))
    own = np.random.default_rng([key, c]).uniform(-.6, .6, (2, 2, 2))
    seg = np.concatenate([base, own])[None] + rng.normal(0, .06, (m, 4, 2, 2))
    seg = seg * rng.uniform(.8, 1.15, (m, 1, 1, 1)) + rng.uniform(-.15, .15, (m, 1, 1, 2))
    ends = seg.astype(np.float32)[..., None, None]  # [m, stroke, end, xy, 1, 1]
    x, y = _grid()
    ax, ay, bx, by = ends[:, :, 0, 0], ends[:, :, 0, 1], ends[:, :, 1, 0], ends[:, :, 1, 1]
    dx, dy, abx, aby = x - ax, y - ay, bx - ax, by - ay
    t = np.clip((dx * abx + dy * aby) / (abx * abx + aby * aby + 1e-6), 0, 1)
    d = np.sqrt(((dx - t * abx) ** 2 + (dy - t * aby) ** 2).min(1))
    mask = _soft(d - rng.uniform(.03, .07, (m, 1, 1)).astype(np.float32))
    ink, paper = _colours(rng, np.full(3, .15), m, .1), _colours(rng, np.full(3, .85), m, .08)
    return _paint(mask, ink, paper), [f"family_{family}"] * m, None


def _spectra(rng: np.random.Generator, key: int, c: int, n_classes: int, m: int) -> Rendered:
    cls = np.random.default_rng([key, c])
    k_mean, bw, theta = cls.uniform(4, 30), cls.uniform(2, 8), cls.uniform(0, np.pi)
    aniso = cls.random()
    ky, kx = np.meshgrid(np.fft.fftfreq(SIZE) * SIZE, np.fft.rfftfreq(SIZE) * SIZE, indexing="ij")
    k, phi = np.hypot(kx, ky), np.arctan2(ky, kx)
    k0 = k_mean * rng.uniform(.85, 1.15, (m, 1, 1))
    gain = np.exp(-(k - k0) ** 2 / (2 * bw**2)) * (1 + aniso * np.cos(2 * (phi - theta))) ** 2
    field = np.fft.irfft2(np.fft.rfft2(rng.normal(size=(m, SIZE, SIZE))) * gain, s=(SIZE, SIZE))
    field = field.astype(np.float32)
    field = (field - field.mean((1, 2), keepdims=True)) / (field.std((1, 2), keepdims=True) + 1e-9)
    lo, hi = PALETTE[cls.choice(len(PALETTE), 2, replace=False)]
    return _paint(0.5 + 0.25 * field, _colours(rng, hi, m, .15),
                  _colours(rng, lo, m, .15)), [""] * m, None


def _mosaic(rng: np.random.Generator, key: int, c: int, n_classes: int, m: int) -> Rendered:
    kind = LATTICES[c % len(LATTICES)]
    cls = np.random.default_rng([key, c])
    cells, param = cls.uniform(2.5, 8), cls.uniform(.15, .35)
    u, v = _coords(rng, m, 1.0, (0.9, 1.1), cls.uniform(0.1, 0.8))
    u = (u + 0.08 * np.sin(3 * v + rng.uniform(0, 6, (m, 1, 1)).astype(np.float32))) * cells
    v = v * cells
    fu, fv = u % 1 - .5, v % 1 - .5
    mask = {"checker": lambda: (np.sin(np.pi * u) * np.sin(np.pi * v) > 0) * 1.0,
            "dots": lambda: _soft(np.hypot(fu, fv) - param, .08),
            "grid": lambda: _soft(.5 - np.maximum(np.abs(fu), np.abs(fv)) - param / 2, .08),
            "zigzag": lambda: _soft(-np.sin(np.pi * (u + 2 * param * np.abs(fv))), .3)}[kind]()
    fg, bg = PALETTE[cls.choice(len(PALETTE), 2, replace=False)]
    return _paint(mask, _colours(rng, fg, m, .15), _colours(rng, bg, m, .15)), [kind] * m, None


def _spurious(rng: np.random.Generator, key: int, c: int, n_classes: int, m: int) -> Rendered:
    images, _, _ = _shape_images(rng, key, c, n_classes, m)
    prefer = np.random.default_rng([key, 20_000 + c])
    x, y = _grid()
    tints = {"red": PALETTE[0], "green": PALETTE[1], "blue": PALETTE[2], "gray": PALETTE[6]}
    attrs: list[list[str]] = [[] for _ in range(m)]
    for attribute, values in ATTRIBUTE_VALUES.items():
        pick = np.where(rng.random(m) < ATTRIBUTE_AGREEMENT, prefer.integers(len(values)),
                        rng.integers(len(values), size=m))
        for i, k in enumerate(pick):
            attrs[i].append(f"{attribute}={values[k]}")
            images[i] = _attribute_overlay(images[i], attribute, values[k], tints, x, y)
    return images, [""] * m, [";".join(a) for a in attrs]


def _attribute_overlay(img: np.ndarray, key: str, value: str, tints: dict, x: np.ndarray,
                       y: np.ndarray) -> np.ndarray:
    if key == "background":
        return 0.7 * img + 0.3 * tints[value]
    edge = np.maximum(np.abs(x), np.abs(y))
    if key == "border" and value != "none":
        img[edge > (0.94 if value == "thin" else 0.85)] = 0.05
    if key == "mark" and value != "none":
        sign = -1 if value == "top-left" else 1
        img[(sign * x > 0.7) & (sign * y > 0.7)] = 0.95
    return img


RENDERERS: dict[str, Callable[..., Rendered]] = {
    "stripes": _stripes, "blobs": _shape_images, "glyphs": _glyphs, "spectra": _spectra,
    "mosaic": _mosaic, "spurious": _spurious, "scripts": _glyphs}
NOISE = {"stripes": .08, "blobs": .06, "glyphs": .05, "spectra": .05, "mosaic": .08,
         "spurious": .05, "scripts": .05}


def write_domain(out_dir: Path, domain: str, rng: np.random.Generator, n_classes: int = 20,
                 n_images: int = 40, image_format: str = "jpeg") -> Path:
    """Write one synthetic domain as a Meta-Album dataset folder `out_dir/<domain>`."""
    if domain not in RENDERERS or image_format not in ("jpeg", "png"):
        raise ValueError(f"got domain {domain!r}, format {image_format!r}; expected one of "
                         f"{list(RENDERERS)} and 'jpeg' or 'png'.")
    root = Path(out_dir) / domain
    (root / "images").mkdir(parents=True, exist_ok=True)
    rows, has_super, has_attrs = [], False, False
    key = int(rng.integers(2**31))  # class definitions: a function of the seed, not of order
    for c in range(n_classes):
        images, supers, attrs = RENDERERS[domain](rng, key, c, n_classes, n_images)
        images = images + NOISE[domain] * rng.standard_normal(images.shape, dtype=np.float32)
        pixels = (np.clip(images, 0, 1) * 255 + 0.5).astype(np.uint8)
        for j in range(n_images):
            fname = f"{domain}_{c:03d}_{j:03d}.{'jpg' if image_format == 'jpeg' else 'png'}"
            options: dict[str, Any] = ({"quality": 90} if image_format == "jpeg"
                                       else {"compress_level": 1})
            Image.fromarray(pixels[j]).save(root / "images" / fname, **options)
            rows.append([fname, f"{domain}_{c:02d}", supers[j], attrs[j] if attrs else ""])
        has_super, has_attrs = bool(supers[0]), attrs is not None
    _write_tables(root, domain, rows, has_super, has_attrs)
    return root


def _write_tables(root: Path, domain: str, rows: list[list[str]], has_super: bool,
                  has_attrs: bool) -> None:
    header = ["FILE_NAME", "CATEGORY", "SUPER_CATEGORY", "attributes"]
    keep = [True, True, has_super, has_attrs]
    with (root / "labels.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow([h for h, k in zip(header, keep, strict=True) if k])
        writer.writerows([v for v, k in zip(row, keep, strict=True) if k] for row in rows)
    info = {"dataset_name": domain, "dataset_description": f"MetaDL Arena synthetic {domain}",
            "image_column_name": "FILE_NAME", "category_column_name": "CATEGORY",
            "has_super_categories": has_super,
            "super_category_column_name": "SUPER_CATEGORY" if has_super else None,
            "license": "CC0 (synthetic)"}
    (root / "info.json").write_text(json.dumps(info, indent=2))


def generate_collection(out_dir: Path, seed: int = 0, n_classes: int = 20, n_images: int = 40,
                        image_format: str = "jpeg",
                        domains: Sequence[str] | None = None) -> Path:
    """Write a Meta-Album collection of synthetic domains with `info/meta_splits.txt`.

    Args:
        out_dir: the collection folder (created).
        seed: every image is a function of (seed, domain); domains do not affect each other.
        n_classes: classes per domain (>= 2; 20 by default like Meta-Album Micro); "scripts"
            has at least WITHIN_DOMAIN_MIN_CLASSES.
        n_images: images per class (40 by default like Meta-Album Mini).
        image_format: "jpeg" or "png".
        domains: subset of `ALL_DOMAINS` to write; default all of them.
    Returns:
        `out_dir`; meta-train holds the generated META_TRAIN domains, meta-test the META_TEST
        ones; "spurious" and "scripts" are in no split (see EXTRA).
    """
    if n_classes < 2 or n_images < 1:
        raise ValueError(f"got n_classes={n_classes}, n_images={n_images}; expected at least 2 "
                         "classes and 1 image per class (21 for cross-domain tasks).")
    out_dir, domains = Path(out_dir), list(ALL_DOMAINS if domains is None else domains)
    for domain in domains:
        rng = np.random.default_rng([seed, ALL_DOMAINS.index(domain) if domain in ALL_DOMAINS
                                     else len(ALL_DOMAINS)])
        classes = max(n_classes, WITHIN_DOMAIN_MIN_CLASSES) if domain == "scripts" else n_classes
        images = max(n_images, FEWSTAB_MIN_IMAGES) if domain == "spurious" else n_images
        write_domain(out_dir, domain, rng, classes, images, image_format)
    splits = {"meta-train": [d for d in META_TRAIN if d in domains],
              "meta-test": [d for d in META_TEST if d in domains]}
    (out_dir / "info").mkdir(parents=True, exist_ok=True)
    (out_dir / "info" / "meta_splits.txt").write_text(json.dumps(splits, indent=2))
    return out_dir
