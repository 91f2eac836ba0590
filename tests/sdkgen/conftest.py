"""Fixtures for the sdkgen tests: golden-file regeneration and the tool-schema corpus.

Regenerate the golden files with ``PTC_REGEN_GOLDEN=1 pytest tests/sdkgen``.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

# Real tool schemas kept in the repository (see tests/data/README.md for source and licence).
CORPUS = Path(__file__).resolve().parents[1] / "data" / "github-mcp-server.json"


@pytest.fixture
def regen_golden() -> bool:
    """Whether golden files are rewritten instead of compared."""
    return os.environ.get("PTC_REGEN_GOLDEN", "") not in ("", "0")


@pytest.fixture(scope="session")
def corpus_path() -> Path:
    """The GitHub MCP server's tool schemas; fails (never skips) when missing."""
    if not CORPUS.is_file():
        pytest.fail(f"corpus missing: expected {CORPUS}")
    return CORPUS


def _load_synthetic() -> Any:
    spec = importlib.util.spec_from_file_location(
        "sdkgen_synthetic_tools", Path(__file__).with_name("synthetic.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def synthetic_tools() -> Callable[[int, int], list[dict[str, Any]]]:
    """``synthetic_tools(namespaces, per_namespace)``: a large, deterministic tool set."""
    generate: Callable[[int, int], list[dict[str, Any]]] = _load_synthetic().synthetic_tools
    return generate
