"""The import layering of ARCHITECTURE.md and the public surface of each package."""

from __future__ import annotations

import ast
import importlib
import sys
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


# -- the rooms of runtime/: by where the code runs ------------------------------------------

#: What code in each room may import: the standard library, these third-party
#: packages, and these parts of ``runtime``. The worker's room runs in the zygote and
#: the sandboxed worker, which load nothing of the host; the sandbox's room sets up
#: the OS layers and needs nothing but the standard library. Both may import the
#: package's error tree, ``runtime._exceptions``, which imports nothing at all.
ROOMS: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {
    "runtime._worker": (
        frozenset({"orjson", "RestrictedPython"}),
        ("runtime._worker", "runtime._sandbox", "runtime._exceptions"),
    ),
    "runtime._sandbox": (frozenset(), ("runtime._sandbox", "runtime._exceptions")),
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute_imports(path: Path) -> set[str]:
    """Every module ``path`` imports, relative imports resolved, strings of importlib too."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                assert node.module is not None
                found.add(node.module)
                continue
            base = package.split(".")
            base = base[: len(base) - (node.level - 1)]
            if node.module:
                found.add(".".join([*base, node.module]))
            else:
                found.update(".".join([*base, alias.name]) for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.add(node.args[0].value)
    return found


def _room_offenders(room: str) -> list[str]:
    third_party, runtime_parts = ROOMS[room]
    offenders = []
    for path in sorted((ROOT / room.replace(".", "/")).rglob("*.py")):
        for name in sorted(_absolute_imports(path)):
            top = name.split(".")[0]
            if top == "runtime":
                if name != "runtime" and name.startswith(runtime_parts):
                    continue
            elif top in sys.stdlib_module_names or top in third_party or top == "__future__":
                continue
            offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    return offenders


@pytest.mark.parametrize("room", sorted(ROOMS))
def test_runtime_rooms_import_only_what_runs_there(room: str) -> None:
    offenders = _room_offenders(room)
    assert not offenders, f"{room} reaches out of its room:\n" + "\n".join(offenders)


def test_the_error_tree_imports_nothing() -> None:
    # Every room imports runtime._exceptions, the zygote without runtime/__init__.
    path = ROOT / "runtime" / "_exceptions.py"
    assert _absolute_imports(path) == {"__future__"}


def test_the_pyodide_worker_imports_only_the_shared_program() -> None:
    # Runs inside Pyodide: the standard library, Pyodide's own ``pyodide`` module, and
    # _program.py and _wire.py (loaded by path as ``_ptc_program`` and ``_ptc_wire``; by
    # package name for type checks).
    path = ROOT / "runtime" / "_pyodide" / "worker" / "bootstrap.py"
    loaded = {"_ptc_program", "_ptc_wire"}
    outside = {
        name
        for name in _absolute_imports(path)
        if name.split(".")[0] not in {*sys.stdlib_module_names, "pyodide", *loaded}
        and name not in ("runtime._worker._program", "runtime._worker._wire")
    }
    assert not outside, outside


def test_the_shared_worker_files_import_nothing_but_the_standard_library() -> None:
    # worker.js loads them by path as modules of their own: no package, no third party.
    for name in ("_program.py", "_wire.py"):
        path = ROOT / "runtime" / "_worker" / name
        outside = {
            module
            for module in _absolute_imports(path)  # (a relative import shows as runtime.*)
            if module.split(".")[0] not in {*sys.stdlib_module_names, "__future__"}
        }
        assert not outside, (name, outside)


def test_room_check_resolves_relative_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    room = tmp_path / "runtime" / "_worker"
    room.mkdir(parents=True)
    (room / "mod.py").write_text(
        "from .._host._pool import Worker\nfrom ._program import x\nimport importlib\n"
        "importlib.import_module('runtime._pyodide._runtime')\nimport anyio\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert _room_offenders("runtime._worker") == [
        "runtime/_worker/mod.py imports anyio",
        "runtime/_worker/mod.py imports runtime._host._pool",
        "runtime/_worker/mod.py imports runtime._pyodide._runtime",
    ]
