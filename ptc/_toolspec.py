"""Loading a tool set named on the command line (``path.py:attr``, ``pkg.mod:attr``, ``x.json``)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

import orjson

from registry import ToolRegistry

__all__ = ["ToolSpecError", "load_registry", "load_schema_file"]


class ToolSpecError(Exception):
    """A tool-set spec cannot be loaded; the message is one line for the user."""


def load_registry(spec: str) -> ToolRegistry:
    """Load the :class:`ToolRegistry` named by ``spec``.

    ``spec`` is ``path/to/file.py:attr`` or ``package.module:attr``; ``attr``
    defaults to ``registry`` and may also name a zero-argument factory.
    """
    target, _, attr = spec.partition(":")
    attr = attr or "registry"
    if not target:
        raise ToolSpecError(
            f"bad tool spec {spec!r}: expected path/to/file.py:attr or package.module:attr"
        )
    if target.endswith(".json"):
        raise ToolSpecError(
            f"{target} is a file of tool schemas, not a registry: name one as "
            "path/to/file.py:attr or package.module:attr"
        )
    module = _import(target)
    try:
        value: Any = module
        for part in attr.split("."):
            value = getattr(value, part)
    except AttributeError:
        raise ToolSpecError(f"{target} has no attribute {attr!r}") from None
    if not isinstance(value, ToolRegistry) and callable(value):
        try:
            value = value()
        except Exception as exc:
            raise ToolSpecError(
                f"calling {target}:{attr}() failed: {type(exc).__name__}: {exc}"
            ) from exc
    if not isinstance(value, ToolRegistry):
        raise ToolSpecError(f"{target}:{attr} is a {type(value).__name__}, not a ToolRegistry")
    return value


def _import(target: str) -> Any:
    looks_like_path = target.endswith(".py") or "/" in target or "\\" in target
    try:
        if looks_like_path:
            path = Path(target)
            if not path.is_file():
                raise ToolSpecError(f"no such file: {target}")
            name = f"_ptc_tools_{abs(hash(str(path.resolve())))}"
            module_spec = importlib.util.spec_from_file_location(name, path)
            if module_spec is None or module_spec.loader is None:
                raise ToolSpecError(f"cannot import {target}")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[name] = module
            module_spec.loader.exec_module(module)
            return module
        return importlib.import_module(target)
    except ToolSpecError:
        raise
    except ModuleNotFoundError as exc:
        if exc.name is not None and target.startswith(exc.name):
            raise ToolSpecError(f"no such module: {target}") from exc
        raise ToolSpecError(f"importing {target} failed: {type(exc).__name__}: {exc}") from exc
    except Exception as exc:
        raise ToolSpecError(f"importing {target} failed: {type(exc).__name__}: {exc}") from exc


def load_schema_file(path: str) -> Any:
    """Parse a ``.json`` file of tool schemas (validated further by ``sdkgen``)."""
    file = Path(path)
    if not file.is_file():
        raise ToolSpecError(f"no such file: {path}")
    try:
        return orjson.loads(file.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise ToolSpecError(f"{path} is not valid JSON: {exc}") from exc
    except OSError as exc:
        raise ToolSpecError(f"cannot read {path}: {exc.strerror}") from exc
