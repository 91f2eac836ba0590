"""RestrictedPython with async support: the optional compile-time language layer.

RestrictedPython 9 rejects ``async``/``await``. :class:`AsyncRestrictingTransformer`
allows ``async def``, ``await``, ``async for``, ``async with`` and async
comprehensions, with the same name checks and guards as their sync forms
(``async for`` and async comprehensions iterate without ``_getiter_``, which
only knows sync iterables). :func:`compile_restricted_program` transforms the
program and then compiles it as the body of ``async def <module>()`` (the shape
``_bootstrap.compile_program`` uses), so top-level ``await`` and ``return``
work and line numbers stay the program's own.

Reviewed additions to RestrictedPython's checks, in :func:`restricted_globals`:
module-valued attributes are hidden unless the module is allowed
(``typing.sys``), and a few reflective helpers of allowed modules that would
read arbitrary attributes or evaluate strings are refused
(``operator.attrgetter``/``methodcaller``, ``typing.get_type_hints``...).
Attribute writes are allowed on dicts, lists and instances of classes the
program defined, nowhere else.

Security warning: RestrictedPython narrows what a program can express; it is
not a sandbox. The OS layers of ``_sandbox`` are the boundary.
"""

from __future__ import annotations

import ast
import builtins
import operator
import sys
import types
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final

from RestrictedPython.Guards import (
    full_write_guard,
    guarded_iter_unpack_sequence,
    guarded_unpack_sequence,
    raise_,
    safe_builtins,
    safer_getattr,
)
from RestrictedPython.Limits import limited_builtins
from RestrictedPython.transformer import RestrictingNodeTransformer

from ._imports import (
    DEFAULT_ALLOWED_MODULES,
    check_imported_names,
    check_program_import,
    installed_guard,
    is_module_allowed,
)
from ._program import PROGRAM_FUNCTION, program_module

__all__ = [
    "PROGRAM_FUNCTION",
    "AsyncRestrictingTransformer",
    "compile_restricted_program",
    "restricted_globals",
]

#: (module, attribute) pairs refused although both names look harmless.
_REFUSED_ATTRIBUTES: Final = frozenset(
    {
        # they fetch attributes by name without going through _getattr_
        ("operator", "attrgetter"),
        ("operator", "methodcaller"),
        ("string", "Formatter"),
        # they evaluate annotation strings as unrestricted code
        ("typing", "get_type_hints"),
        ("typing", "ForwardRef"),
    }
)

# RestrictedPython's guards are untyped; give mypy one typed name for it.
_safer_getattr: Callable[..., Any] = safer_getattr


#: Async protocol methods a program class may define, like ``__init__``.
_ASYNC_MAGIC_METHODS: Final = frozenset({"__aenter__", "__aexit__", "__aiter__", "__anext__"})


class AsyncRestrictingTransformer(RestrictingNodeTransformer):
    """RestrictedPython's policy, plus reviewed support for the async syntax."""

    def check_name(
        self, node: ast.AST, name: str | None, allow_magic_methods: bool = False
    ) -> None:
        """Also allow the async protocol methods where RestrictedPython allows ``__init__``."""
        if allow_magic_methods and name in _ASYNC_MAGIC_METHODS and node.col_offset != 0:  # type: ignore[attr-defined]
            return
        super().check_name(node, name, allow_magic_methods)  # type: ignore[arg-type]

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
        """Allow ``async def`` with exactly the checks of ``def``."""
        self.check_name(node, node.name, allow_magic_methods=True)
        self.check_function_argument_names(node)
        with self.print_info.new_print_scope():
            node = self.node_contents_visit(node)
            # Typed for FunctionDef only; it just inserts into ``node.body``.
            self.inject_print_collector(node)  # type: ignore[arg-type]
        return node

    def visit_Await(self, node: ast.Await) -> ast.AST:
        """Allow ``await``; its operand is checked like any expression."""
        return self.node_contents_visit(node)

    def visit_AsyncFor(self, node: ast.AsyncFor) -> ast.AST:
        """Allow ``async for``; targets are name-checked, unpacking is guarded."""
        node = self.node_contents_visit(node)
        if isinstance(node.target, ast.Tuple):
            tmp_target, unpack = self.gen_unpack_wrapper(node, node.target)
            node.target = tmp_target
            node.body.insert(0, unpack)
        return node

    def visit_AsyncWith(self, node: ast.AsyncWith) -> ast.AST:
        """Allow ``async with`` with the tuple-unpacking guard of ``with``."""
        node = self.node_contents_visit(node)
        for item in reversed(node.items):
            if isinstance(item.optional_vars, ast.Tuple):
                tmp_target, unpack = self.gen_unpack_wrapper(node, item.optional_vars)
                item.optional_vars = tmp_target
                node.body.insert(0, unpack)
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
        """Allow annotated assignments (dataclass and NamedTuple fields).

        The target is checked like any assignment target (names, and
        ``_write_`` for attributes); the annotation is an ordinary, checked
        expression.
        """
        return self.node_contents_visit(node)

    def visit_comprehension(self, node: ast.comprehension) -> ast.AST:
        """Guard sync comprehensions as RestrictedPython does; allow async ones."""
        if not node.is_async:
            guarded = super().visit_comprehension(node)
            assert isinstance(guarded, ast.AST)
            return guarded
        node = self.node_contents_visit(node)
        if isinstance(node.target, ast.Tuple):
            self.error(node, "tuple unpacking in an async comprehension is not allowed")
        return node


def _syntax_error(
    message: str, filename: str, lineno: int | None, offset: int | None
) -> SyntaxError:
    error = SyntaxError(message)
    error.filename = filename
    error.lineno = lineno
    error.offset = offset
    return error


def _top_level(nodes: Sequence[ast.AST]) -> Iterator[ast.AST]:
    """Walk the program's own scope, not nested functions, lambdas or classes."""
    pending = list(nodes)
    while pending:
        node = pending.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            pending.extend(ast.iter_child_nodes(node))


def _first_error_line(errors: Sequence[str]) -> int | None:
    # RestrictedPython formats errors as "Line <n>: <message>".
    head = errors[0]
    if head.startswith("Line "):
        number = head[5:].split(":", 1)[0]
        if number.isdigit():
            return int(number)
    return None


def compile_restricted_program(source: str, filename: str = "<program>") -> types.CodeType:
    """Compile ``source`` under the async RestrictedPython policy.

    The code object defines ``async def <module>()`` holding the program; a
    bare or missing ``return`` returns the ``__ptc_nothing__`` global. Run it
    with ``exec(code, restricted_globals(base))`` and await the function.

    Raises:
        SyntaxError: the program does not parse, or the policy rejects it; the
            message lists every rejection with the program's line numbers.
    """
    tree = ast.parse(source, filename, "exec")
    for node in _top_level(tree.body):
        if isinstance(node, ast.Yield | ast.YieldFrom):
            raise _syntax_error(
                "'yield' is not allowed at the top level of the program",
                filename,
                node.lineno,
                node.col_offset + 1,
            )
    errors: list[str] = []
    warnings: list[str] = []
    used_names: dict[str, bool] = {}
    policy = AsyncRestrictingTransformer(errors, warnings, used_names)
    tree = policy.visit(tree)
    if errors:
        raise _syntax_error("\n".join(errors), filename, _first_error_line(errors), None)
    # The policy's own nodes have no positions: fill them in after wrapping.
    module = program_module(tree, source)
    ast.fix_missing_locations(module)
    return compile(module, filename, "exec", dont_inherit=True)


class _Guards:
    """The runtime half of the policy: one instance per program namespace."""

    def __init__(self, allowed: frozenset[str], print_function: Callable[..., None]) -> None:
        self.allowed = allowed
        self.print_function = print_function
        self.program_classes: weakref.WeakSet[type] = weakref.WeakSet()

    def getattr(self, obj: object, name: str, default: object = _safer_getattr) -> Any:
        if isinstance(obj, types.ModuleType) and (obj.__name__, name) in _REFUSED_ATTRIBUTES:
            raise AttributeError(f"{obj.__name__}.{name} is not available to the program")
        # safer_getattr's own default is None; a missing attribute should raise.
        value = _safer_getattr(obj, name, raise_ if default is _safer_getattr else default)
        if isinstance(value, types.ModuleType) and not is_module_allowed(
            value.__name__, self.allowed
        ):
            raise AttributeError(f"module {value.__name__!r} is not available to the program")
        return value

    def hasattr(self, obj: object, name: str) -> bool:
        try:
            self.getattr(obj, name)
        except (AttributeError, NotImplementedError):
            return False
        return True

    def write(self, obj: Any) -> Any:
        cls = type(obj)
        if cls in (dict, list, set) or any(c in self.program_classes for c in cls.__mro__):
            return obj
        if isinstance(obj, type) and obj in self.program_classes:
            return obj
        return full_write_guard(obj)

    def import_(
        self,
        name: str,
        globals: Mapping[str, Any] | None = None,  # __import__'s signature
        locals: Mapping[str, Any] | None = None,
        fromlist: Sequence[str] | None = (),
        level: int = 0,
    ) -> types.ModuleType:
        check_program_import(name, fromlist, level, self.allowed)
        module = builtins.__import__(name, globals, locals, fromlist, level)
        check_imported_names(module, fromlist, self.allowed)
        for item in fromlist or ():
            if (module.__name__, item) in _REFUSED_ATTRIBUTES:
                raise ImportError(f"{module.__name__}.{item} is not available to the program")
        return module

    def print_factory(self, _getattr_: object = None) -> _Printer:
        return _Printer(self.print_function)


class _ProgramMetaclass:
    """``__metaclass__`` of program classes: the real metaclass, plus bookkeeping.

    RestrictedPython rewrites every ``class`` statement to use it; delegating
    ``__prepare__`` and the call to the metaclass the bases imply keeps
    ``Enum``, ``NamedTuple`` and ``ABC`` subclasses working.
    """

    def __init__(self, classes: weakref.WeakSet[type]) -> None:
        self.classes = classes

    @staticmethod
    def _real(bases: tuple[type, ...]) -> type:
        winner: type = type
        for base in bases:
            meta = type(base)
            if issubclass(winner, meta):
                continue
            if issubclass(meta, winner):
                winner = meta
                continue
            raise TypeError("metaclass conflict among the bases")
        return winner

    def __prepare__(self, name: str, bases: tuple[type, ...], **kwargs: Any) -> Mapping[str, Any]:
        prepare = self._real(bases).__prepare__
        return prepare(name, bases, **kwargs)

    def __call__(
        self, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **kwargs: Any
    ) -> type:
        cls: type = self._real(bases)(name, bases, namespace, **kwargs)
        self.classes.add(cls)
        return cls


class _Printer:
    """What RestrictedPython's ``_print_`` returns: forwards ``print`` to the runtime."""

    def __init__(self, print_function: Callable[..., None]) -> None:
        self.print_function = print_function
        self.text: list[str] = []

    def _call_print(self, *objects: object, **kwargs: Any) -> None:
        if kwargs.get("file") is not None:
            raise TypeError("print(file=...) is not allowed in the program")
        kwargs.pop("file", None)
        sep = kwargs.get("sep") or " "
        end = kwargs.get("end")
        self.text.append(sep.join(map(str, objects)) + ("\n" if end is None else end))
        self.print_function(*objects, **kwargs)

    def __call__(self) -> str:  # the value of the ``printed`` name
        return "".join(self.text)


def _inplace(op: str, target: Any, value: Any) -> Any:
    function = _INPLACE.get(op)
    if function is None:
        raise SyntaxError(f"unsupported in-place operator {op!r}")
    return function(target, value)


_INPLACE: Final[Mapping[str, Callable[[Any, Any], Any]]] = {
    "+=": operator.iadd,
    "-=": operator.isub,
    "*=": operator.imul,
    "/=": operator.itruediv,
    "//=": operator.ifloordiv,
    "%=": operator.imod,
    "**=": operator.ipow,
    "<<=": operator.ilshift,
    ">>=": operator.irshift,
    "&=": operator.iand,
    "|=": operator.ior,
    "^=": operator.ixor,
    "@=": operator.imatmul,
}

_EXTRA_BUILTINS: Final = (
    "all",
    "any",
    "ascii",
    "bin",
    "bytes",
    "dict",
    "enumerate",
    "filter",
    "format",
    "frozenset",
    "iter",
    "map",
    "max",
    "min",
    "next",
    "reversed",
    "set",
    "sorted",
    "sum",
    "zip",
    "staticmethod",
    "classmethod",
    "property",
    "NotImplemented",
    "StopAsyncIteration",
    "TimeoutError",
    "ConnectionError",
    "RecursionError",
    "ExceptionGroup",
)


def restricted_globals(
    base: dict[str, object], *, allowed: frozenset[str] | None = None
) -> dict[str, object]:
    """A program namespace for :func:`compile_restricted_program` code.

    ``base`` holds the runtime's names (``tools``, ``ToolCallError``, the
    ``__ptc_nothing__`` sentinel, optionally ``print`` for the captured logs);
    they win over the guards except for ``__builtins__``, which is replaced
    by RestrictedPython's safe builtins plus a reviewed set. ``allowed``
    defaults to the installed import guard's allow-list, else
    :data:`DEFAULT_ALLOWED_MODULES`.
    """
    if allowed is None:
        guard = installed_guard()
        allowed = guard.allowed if guard is not None else DEFAULT_ALLOWED_MODULES
    print_function = base.get("print")
    if not callable(print_function):
        print_function = _stdout_print
    guards = _Guards(frozenset(allowed), print_function)
    safe: dict[str, object] = dict(safe_builtins)
    safe.update(limited_builtins)
    for name in _EXTRA_BUILTINS:
        safe[name] = getattr(builtins, name)
    safe.update(
        {
            "__import__": guards.import_,
            "getattr": guards.getattr,
            "hasattr": guards.hasattr,
            "_getattr_": guards.getattr,
        }
    )
    namespace: dict[str, object] = {
        "__name__": "__main__",
        "__metaclass__": _ProgramMetaclass(guards.program_classes),
        "_getattr_": guards.getattr,
        "_getitem_": operator.getitem,
        "_getiter_": iter,
        "_iter_unpack_sequence_": guarded_iter_unpack_sequence,
        "_unpack_sequence_": guarded_unpack_sequence,
        "_write_": guards.write,
        "_inplacevar_": _inplace,
        "_apply_": _apply,
        "_print_": guards.print_factory,
    }
    namespace.update({key: value for key, value in base.items() if key != "print"})
    namespace["__builtins__"] = safe
    return namespace


def _apply(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    return function(*args, **kwargs)


def _stdout_print(*objects: object, **kwargs: Any) -> None:
    print(*objects, **kwargs, file=sys.stdout)
