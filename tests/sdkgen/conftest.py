"""Fixtures for the sdkgen tests: golden-file regeneration and the shared corpus.

Regenerate the golden files with ``PTC_REGEN_GOLDEN=1 pytest tests/sdkgen``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# ``shared/`` is a sibling of the repository root directory (read-only data).
SHARED_DIR = Path(__file__).resolve().parents[3] / "shared"


@pytest.fixture
def regen_golden() -> bool:
    """Whether golden files are rewritten instead of compared."""
    return os.environ.get("PTC_REGEN_GOLDEN", "") not in ("", "0")


@pytest.fixture(scope="session")
def corpus_path() -> Path:
    """The GitHub MCP server's tool schemas; fails (never skips) when missing."""
    path = SHARED_DIR / "corpus" / "schemas" / "github-mcp-server.json"
    if not path.is_file():
        pytest.fail(f"corpus missing: expected {path} (shared/ next to the repository root)")
    return path
