"""Fixtures of the authorization suite: the real app in process with one actor per role."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
