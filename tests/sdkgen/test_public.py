"""The public surface of sdkgen and the layering rule (imports nothing of ours)."""

from __future__ import annotations

import ast
from pathlib import Path

import sdkgen

PACKAGE = Path(sdkgen.__file__).parent


def test_all_is_sorted_and_exported() -> None:
    assert sdkgen.__all__ == sorted(sdkgen.__all__)
    for name in (
        "DISCOVERY_INSTRUCTIONS",
        "SDK_INSTRUCTIONS",
        "ToolCatalog",
        "render_discovery",
        "json_schema_to_py",
        "normalize_tool_schemas",
        "render_sdk",
        "sdk_stats",
    ):
        assert name in sdkgen.__all__
        assert getattr(sdkgen, name) is not None


def test_sdkgen_imports_no_other_project_package() -> None:
    forbidden = {"ptc", "registry", "runtime"}
    for path in sorted(PACKAGE.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                roots = {node.module.split(".")[0]}
            else:
                continue
            assert not roots & forbidden, f"{path.name} imports {roots & forbidden}"


def test_modules_stay_small() -> None:
    for path in PACKAGE.glob("*.py"):
        assert len(path.read_text(encoding="utf-8").splitlines()) < 800, path.name
