"""The import allow-list: a language-level layer on top of the OS sandbox.

:func:`install_import_guard` replaces ``builtins.__import__`` so that code run by
the program may import only allowed modules (and their submodules), even when
a module is already in ``sys.modules``. Imports made by the runtime's and the
standard library's own modules (lazy imports inside ``asyncio``, ``json``...)
keep working: the guard trusts a caller whose globals are the ``__dict__`` of a
module registered in ``sys.modules``, and the program's namespace never is.

What :data:`DEFAULT_ALLOWED_MODULES` leaves out, and why: ``os``, ``sys``,
``subprocess``, ``socket``, ``ctypes``, ``importlib``, ``pathlib``, ``io``,
``shutil``, ``tempfile``, ``signal``, ``threading``, ``multiprocessing``,
``gc``, ``inspect``, ``types``, ``builtins``, ``pickle``, ``marshal``,
``code``/``codeop``, ``runpy``, ``pty``, ``mmap``, ``resource``, ``select``
(processes, files, network, interpreter internals, code objects, or arbitrary
imports by name). ``zoneinfo`` is left out because the worker has no time zone
database.

Security warning: this is a convenience, not a boundary. Without
RestrictedPython a program reaches forbidden modules through attributes of
allowed ones (``random._os``) or by running code with a module's globals;
with RestrictedPython, underscore attributes are rejected and
``_restricted`` also hides module-valued attributes that are not allowed.
Only the OS layers of ``_sandbox`` stop a hostile program.
"""

from __future__ import annotations

import builtins
import importlib
import sys
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

__all__ = [
    "DEFAULT_ALLOWED_MODULES",
    "ImportGuard",
    "check_program_import",
    "install_import_guard",
    "installed_guard",
    "is_module_allowed",
    "preload_modules",
]

#: The standard-library modules a program may import by default.
DEFAULT_ALLOWED_MODULES: Final = frozenset(
    {
        "abc",
        "array",
        "asyncio",
        "base64",
        "binascii",
        "bisect",
        "calendar",
        "cmath",
        "collections",
        "contextlib",
        "copy",
        "csv",
        "dataclasses",
        "datetime",
        "decimal",
        "difflib",
        "enum",
        "fractions",
        "functools",
        "graphlib",
        "hashlib",
        "heapq",
        "hmac",
        "html",
        "itertools",
        "json",
        "math",
        "numbers",
        "operator",
        "pprint",
        "random",
        "re",
        "secrets",
        "statistics",
        "string",
        "struct",
        "textwrap",
        "time",
        "typing",
        "unicodedata",
        "urllib.parse",
        "uuid",
        "zlib",
    }
)

_ImportFunction = Callable[..., types.ModuleType]


def is_module_allowed(name: str, allowed: frozenset[str]) -> bool:
    """Whether ``name`` or one of its parent packages is in ``allowed``."""
    parts = name.split(".")
    return any(".".join(parts[:end]) in allowed for end in range(1, len(parts) + 1))


def _is_allowed_value(value: object, allowed: frozenset[str]) -> bool:
    return not isinstance(value, types.ModuleType) or is_module_allowed(value.__name__, allowed)


def check_program_import(
    name: str, fromlist: Sequence[str] | None, level: int, allowed: frozenset[str]
) -> None:
    """Raise ``ImportError`` unless the program may run this import statement."""
    if level:
        raise ImportError("relative imports are not allowed in the program", name=name)
    if name == "__future__" or is_module_allowed(name, allowed):
        # ``from __future__ import ...`` at the top of a program runs this
        # import too; the module only describes compiler features.
        return
    # ``from urllib import parse`` when only ``urllib.parse`` is allowed.
    names = [item for item in fromlist or () if item != "*"]
    if names and all(is_module_allowed(f"{name}.{item}", allowed) for item in names):
        return
    raise ImportError(f"import of {name!r} is not allowed in the program", name=name)


def check_imported_names(
    module: types.ModuleType, fromlist: Sequence[str] | None, allowed: frozenset[str]
) -> None:
    """Refuse ``from allowed import forbidden_module`` (e.g. ``from typing import sys``)."""
    for item in fromlist or ():
        if item == "*":
            raise ImportError("'import *' is not allowed in the program")
        value = getattr(module, item, None)
        if not _is_allowed_value(value, allowed):
            raise ImportError(f"{module.__name__}.{item} is a module the program may not use")


def _is_trusted(caller_globals: Mapping[str, Any]) -> bool:
    name = caller_globals.get("__name__")
    module = sys.modules.get(name) if isinstance(name, str) else None
    return module is not None and getattr(module, "__dict__", None) is caller_globals


class ImportGuard:
    """The replacement ``__import__``; :attr:`allowed` is what the program may import."""

    __slots__ = ("allowed", "original")

    def __init__(self, allowed: frozenset[str], original: _ImportFunction) -> None:
        self.allowed = allowed
        self.original = original

    def __call__(
        self,
        name: str,
        globals: Mapping[str, Any] | None = None,  # __import__'s signature
        locals: Mapping[str, Any] | None = None,
        fromlist: Sequence[str] | None = (),
        level: int = 0,
    ) -> types.ModuleType:
        # The frame that runs the import statement, not the forgeable argument.
        caller = sys._getframe(1).f_globals
        if _is_trusted(caller):
            return self.original(name, globals, locals, fromlist, level)
        check_program_import(name, fromlist, level, self.allowed)
        module = self.original(name, globals, locals, fromlist, level)
        check_imported_names(module, fromlist, self.allowed)
        return module


def install_import_guard(allowed: frozenset[str]) -> None:
    """Replace ``builtins.__import__`` with an :class:`ImportGuard` for ``allowed``.

    Call it in the worker after the runtime's own imports and before the
    program runs. Installing again replaces the allow-list.

    Security warning: a language-level convenience only; see the module docstring.
    """
    current = builtins.__import__
    original = current.original if isinstance(current, ImportGuard) else current
    builtins.__import__ = ImportGuard(frozenset(allowed), original)


def installed_guard() -> ImportGuard | None:
    """The guard in ``builtins.__import__``, if one is installed."""
    current = builtins.__import__
    return current if isinstance(current, ImportGuard) else None


def preload_modules(allowed: Iterable[str]) -> list[str]:
    """Import every allowed module now (in the zygote); return the names that failed.

    The sandboxed worker may not be able to read the files of a module later,
    and pre-imported modules are shared copy-on-write by every worker.
    """
    failed: list[str] = []
    for name in sorted(allowed):
        try:
            importlib.import_module(name)
        except Exception:  # a missing optional module is just reported
            failed.append(name)
    return failed
