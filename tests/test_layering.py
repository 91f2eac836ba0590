"""The import layering of ARCHITECTURE.md and the public surface of each package."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("ptc", "sdkgen", "runtime", "registry")
# Who may import whom: only ptc glues the three lower packages.
ALLOWED = {
    "ptc": {"sdkgen", "runtime", "registry"},
    "sdkgen": set(),
    "runtime": set(),
    "registry": set(),
}


def _imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found & set(PACKAGES)


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_only_point_down(package: str) -> None:
    offenders = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for imported in _imported_packages(path) - {package}:
            if imported not in ALLOWED[package]:
                offenders.append(f"{path.relative_to(ROOT)} imports {imported}")
    assert not offenders, "layering violated:\n" + "\n".join(offenders)


def test_layering_check_detects_a_bad_edge(tmp_path: Path) -> None:
    bad = tmp_path / "mod.py"
    bad.write_text("from ptc import CodeExecutor\nimport registry.x\n", encoding="utf-8")
    assert _imported_packages(bad) == {"ptc", "registry"}


def _isort_key(name: str) -> tuple[int, str]:
    # The order ruff (RUF022) keeps: CONSTANTS, then Classes, then functions.
    if name.isupper():
        return (0, name)
    return (1, name) if name[:1].isupper() else (2, name)


@pytest.mark.parametrize("package", PACKAGES)
def test_public_surface_is_explicit_and_sorted(package: str) -> None:
    module = importlib.import_module(package)
    names = module.__all__
    assert list(names) == sorted(names, key=_isort_key), f"{package}.__all__ is not sorted"
    missing = [name for name in names if not hasattr(module, name)]
    assert not missing, f"{package}.__all__ names missing attributes: {missing}"
    assert (ROOT / package / "py.typed").is_file()


def test_registry_public_names_exist() -> None:
    import registry

    for name in (
        "ToolRegistry",
        "ToolDefinition",
        "ToolOutput",
        "ToolCall",
        "ToolSuccess",
        "ToolFailure",
        "ToolError",
        "ErrorInfo",
        "AbortSignal",
    ):
        assert name in registry.__all__
