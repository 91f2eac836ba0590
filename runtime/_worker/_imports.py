"""The import allow-list: a language convenience on top of the OS sandbox.

:func:`install_import_guard` replaces ``builtins.__import__`` so that code run by
the program may import only allowed modules (and their submodules), even when
a module is already in ``sys.modules``. It keeps well-meaning programs on the
modules the runtime supports; it is not what stops a hostile one.

Imports made by the standard library's and the runtime's own code (lazy imports
inside ``asyncio``, codec lookups...) keep working: the guard trusts an import
by what *code* runs it, never by the globals that code runs in. Trusted are the
code objects of the modules loaded when the guard was installed (every
function, method and nested function reachable from ``sys.modules``, found by
:func:`trust_loaded_modules`, ideally once in the zygote) and the body of a
module the import system loads later (and the code nested in it). They are
compared by identity, so a program cannot make its own code look trusted:
``exec``/``eval`` with a module's globals, ``compile`` with a standard-library
file name, ``CodeType.replace`` and ``FunctionType(code, module.__dict__)`` all
make new code objects, and the guard checks their imports like the program's.

What :data:`DEFAULT_ALLOWED_MODULES` leaves out, and why: ``os``, ``sys``,
``subprocess``, ``socket``, ``ctypes``, ``importlib``, ``pathlib``, ``io``,
``shutil``, ``tempfile``, ``signal``, ``threading``, ``multiprocessing``,
``gc``, ``inspect``, ``types``, ``builtins``, ``pickle``, ``marshal``,
``code``/``codeop``, ``runpy``, ``pty``, ``mmap``, ``resource``, ``select``
(processes, files, network, interpreter internals, code objects, or arbitrary
imports by name). ``zoneinfo`` is left out because the worker has no time zone
database.

Security warning: this is a convenience, not a boundary. In plain CPython a
program reaches unlisted modules without importing them: as attributes of
allowed ones (``random._os``, ``json.codecs.sys``), through the guard itself
(``__import__.original``, the ``__globals__`` of its methods), through
``__subclasses__``, frames and the import system's loaders (``json.__spec__``),
or a loader of its own whose module body the guard takes for the import
system's. None of these is closed here; RestrictedPython (``restricted=True``)
refuses underscore names and ``_restricted`` hides module-valued attributes of
unlisted modules. Only the OS layers of ``_sandbox`` stop a hostile program.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
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
    "trust_loaded_modules",
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

# Modules that the C code of an allowed module imports on the program's behalf
# (a C function has no frame: the guard sees the program's). ``_strptime`` backs
# ``datetime.strptime`` and ``time.strptime``. Importable when an owner is allowed.
_IMPORTED_FOR: Final = {"_strptime": ("datetime", "time")}


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
    owners = _IMPORTED_FOR.get(name, ())
    if (
        name == "__future__"
        or is_module_allowed(name, allowed)
        or any(o in allowed for o in owners)
    ):
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


# The trusted code objects by id. The values keep them alive, so an id is never
# reused by a code object made later (by the program).
_TRUSTED_CODE: dict[int, types.CodeType] = {}
# The modules whose code is in it (by name and object: a name can be reloaded).
_TRUSTED_MODULES: dict[str, types.ModuleType] = {}
# The import system's helper that runs a module's body (and its other calls).
_BOOTSTRAP: Any = importlib.import_module("importlib._bootstrap")
_RUN_BY_IMPORT_SYSTEM: Final[types.CodeType] = _BOOTSTRAP._call_with_frames_removed.__code__


def _trust_code(code: types.CodeType) -> None:
    """Trust ``code`` and every code object nested in it (functions, lambdas, classes)."""
    pending = [code]
    while pending:
        current = pending.pop()
        if id(current) not in _TRUSTED_CODE:
            _TRUSTED_CODE[id(current)] = current
            pending.extend(const for const in current.co_consts if type(const) is types.CodeType)


# What a module attribute that holds code can be (besides a class), and where
# its code is: 0 a function, 1 ``__func__``, 2 ``fget``/``fset``/``fdel``,
# 3 ``func``, 4 ``__wrapped__``.
_HOLDERS: Final[Mapping[type, int]] = {
    types.FunctionType: 0,
    staticmethod: 1,
    classmethod: 1,
    types.MethodType: 1,
    property: 2,
    functools.partial: 3,
    functools.cached_property: 3,
    functools._lru_cache_wrapper: 4,
}


def _trust_values(values: Iterable[object], seen: set[int]) -> None:
    """Trust the code of module attributes: functions, classes' methods, wrappers."""
    pending = list(values)
    while pending:
        item: Any = pending.pop()
        holder = _HOLDERS.get(type(item))
        if holder is None:
            if isinstance(item, type) and id(item) not in seen:
                seen.add(id(item))
                pending.extend(vars(item).values())
        elif holder == 0:
            if id(item) in seen:
                continue
            seen.add(id(item))
            _trust_code(item.__code__)
            # A decorator's wrapper: the function it wraps is in a cell or __wrapped__.
            for cell in item.__closure__ or ():
                with contextlib.suppress(ValueError):  # (an empty cell)
                    pending.append(cell.cell_contents)
            wrapped = item.__dict__.get("__wrapped__")
            if wrapped is not None:
                pending.append(wrapped)
        elif holder == 1:
            pending.append(item.__func__)
        elif holder == 2:
            pending += (item.fget, item.fset, item.fdel)
        elif holder == 3:
            pending.append(item.func)
        elif id(item) not in seen:
            seen.add(id(item))
            pending.append(item.__wrapped__)


def trust_loaded_modules() -> int:
    """Trust the code of every module loaded now; return how many code objects are trusted.

    Call it before any program code runs: what a program adds to a module
    afterwards is never trusted. Incremental, so the zygote can do the work
    once after its imports and each worker's :func:`install_import_guard` only
    looks at what it imported since: ``sys.modules`` keeps the order modules
    were added in, so those stand at its end, read back to the first one seen
    before. (A forked worker touches no more of the zygote's module objects,
    so their pages stay shared. A module replaced in place under a name seen
    before is not trusted: its imports are refused, never wrongly allowed.)
    """
    seen: set[int] = set()
    added: list[tuple[str, types.ModuleType]] = []
    for name, module in reversed(sys.modules.items()):
        if not isinstance(module, types.ModuleType):
            continue
        if _TRUSTED_MODULES.get(name) is module:
            break
        added.append((name, module))
    for name, module in reversed(added):
        _TRUSTED_MODULES[name] = module
        _trust_values(vars(module).values(), seen)
    return len(_TRUSTED_CODE)


def _is_trusted(frame: types.FrameType) -> bool:
    """Whether the code that runs ``frame`` is the standard library's or the runtime's."""
    code = frame.f_code
    if _TRUSTED_CODE.get(id(code)) is code:
        return True
    # The body of a module the import system loads now (a lazy import of trusted
    # code): run by the import system's helper, called from trusted code. Its
    # nested code (the functions it defines) is trusted from now on.
    caller = frame.f_back
    if caller is None or caller.f_code is not _RUN_BY_IMPORT_SYSTEM:
        return False
    loader = caller.f_back
    if loader is None or _TRUSTED_CODE.get(id(loader.f_code)) is not loader.f_code:
        return False
    _trust_code(code)
    return True


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
        # The code that runs the import statement, not the forgeable argument
        # (nor the globals it runs in, which any code can borrow).
        if _is_trusted(sys._getframe(1)):
            return self.original(name, globals, locals, fromlist, level)
        check_program_import(name, fromlist, level, self.allowed)
        module = self.original(name, globals, locals, fromlist, level)
        check_imported_names(module, fromlist, self.allowed)
        return module


def install_import_guard(allowed: frozenset[str]) -> None:
    """Replace ``builtins.__import__`` with an :class:`ImportGuard` for ``allowed``.

    Call it in the worker after the runtime's own imports and before the
    program runs: it trusts the code of the modules loaded by then (see
    :func:`trust_loaded_modules`). Installing again replaces the allow-list.

    Security warning: a language-level convenience only; see the module docstring.
    """
    trust_loaded_modules()
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
