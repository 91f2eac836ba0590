"""Fixtures for the sdkgen tests: golden-file regeneration and the tool-schema corpus.

Regenerate the golden files with ``PTC_REGEN_GOLDEN=1 pytest tests/sdkgen``.
"""

from __future__ import annotations

import os
from pathlib import Path

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
