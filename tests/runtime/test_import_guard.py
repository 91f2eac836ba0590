"""The import allow-list trusts code, not the globals it runs in.

The guard lets the standard library's own lazy imports through; it used to
recognise them by their globals (a module's ``__dict__``), which any code can
borrow. Now it recognises the code objects themselves, so every way a program
makes code of its own (``exec``, ``eval``, ``compile`` with a forged file name,
``CodeType.replace``, ``FunctionType``) is checked like the program.

What the guard does not close (attributes of allowed modules such as
``random._os``, the guard's own internals, loaders) is listed in the
``runtime._worker._imports`` docstring and in ``ptc doctor``: it is a convenience, the
OS layers are the boundary.
"""

from __future__ import annotations

import builtins
import json
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest

from runtime import Limits, SubprocessRuntime
from runtime._worker._imports import install_import_guard, trust_loaded_modules
from runtime.testing import ToolBox

# Programs that run an import of ``os`` in code that looks like ``json``'s.
BORROWED = {
    "exec-with-module-globals": "exec('import os', json.__dict__)\nreturn json.os.name",
    "eval-with-module-globals": "return eval('__import__(\"os\").name', json.__dict__)",
    "compiled-with-a-stdlib-file-name": (
        "code = compile('import os', json.__file__, 'exec')\n"
        "exec(code, json.__dict__)\nreturn json.os.name"
    ),
    "function-with-module-globals": (
        "f = type(lambda: 0)(compile('import os\\nglobal o\\no = os', json.__file__, 'exec'),"
        " json.__dict__)\nf()\nreturn json.o.name"
    ),
    "replaced-code-object": (
        "def g():\n    import os\n    return os.name\n"
        "code = g.__code__.replace(co_filename=json.__file__, co_name='dumps')\n"
        "return type(g)(code, json.__dict__)()"
    ),
    "planted-method": (
        "import json.encoder\n"
        "src = 'def encode(self, o):\\n    import os\\n    return os.name\\n'\n"
        "exec(compile(src, json.encoder.__file__, 'exec'), json.encoder.__dict__)\n"
        "json.encoder.JSONEncoder.encode = json.encoder.encode\n"
        "return json.dumps(1)"
    ),
}


@pytest.fixture
def guarded() -> Iterator[None]:
    import json.encoder

    original = builtins.__import__
    # What the programs plant in json (in this process, not a worker) must not
    # outlive the test: every later json.dumps here would run it.
    planted = json.encoder.JSONEncoder.encode
    had_encode = hasattr(json.encoder, "encode")
    install_import_guard(frozenset({"json"}))
    try:
        yield
    finally:
        builtins.__import__ = original
        json.encoder.JSONEncoder.encode = planted  # type: ignore[method-assign]
        if not had_encode and hasattr(json.encoder, "encode"):
            del json.encoder.encode
        for leftover in ("os", "o"):
            json.__dict__.pop(leftover, None)


def program_namespace() -> dict[str, Any]:
    return {"__name__": "__main__", "__builtins__": builtins, "json": json}


@pytest.mark.usefixtures("guarded")
@pytest.mark.parametrize("source", BORROWED.values(), ids=BORROWED.keys())
def test_code_the_program_makes_is_not_trusted_whatever_its_globals(source: str) -> None:
    body = "def program():\n" + "".join(f"    {line}\n" for line in source.splitlines())
    namespace = program_namespace()
    exec(compile(body, "<program>", "exec"), namespace)
    with pytest.raises(ImportError, match="import of 'os' is not allowed"):
        namespace["program"]()


@pytest.mark.usefixtures("guarded")
def test_the_code_of_loaded_modules_stays_trusted() -> None:
    module = types.ModuleType("ptc_test_lazy_importer")
    exec("def lazy():\n    import os\n    return os.sep", module.__dict__)
    sys.modules[module.__name__] = module
    try:
        # Loaded after the guard: trusted once recorded (as install does before a program).
        trust_loaded_modules()
        assert module.lazy() == "/"
        namespace = program_namespace()
        namespace["module"] = module
        with pytest.raises(ImportError):
            exec("exec('import os', module.__dict__)", namespace)
    finally:
        del sys.modules[module.__name__]


@pytest.mark.usefixtures("guarded")
def test_a_module_replaced_in_place_is_not_trusted() -> None:
    # Only modules added since the last pass are read (at the end of sys.modules):
    # one put under a name already trusted keeps its place, and is not trusted.
    # Its imports are refused, never wrongly allowed.
    name = "ptc_test_replaced"
    first = types.ModuleType(name)
    sys.modules[name] = first
    sys.modules[name + "_after"] = types.ModuleType(name + "_after")
    try:
        trust_loaded_modules()
        second = types.ModuleType(name)
        exec("def lazy():\n    import os\n    return os.sep", second.__dict__)
        sys.modules[name] = second
        trust_loaded_modules()
        with pytest.raises(ImportError, match="import of 'os' is not allowed"):
            second.lazy()
        del sys.modules[name]
        sys.modules[name] = second  # added again: at the end, so trusted
        trust_loaded_modules()
        assert second.lazy() == "/"
    finally:
        sys.modules.pop(name, None)
        sys.modules.pop(name + "_after", None)


@pytest.mark.anyio
async def test_in_a_worker_borrowed_globals_are_refused_and_lazy_imports_work() -> None:
    checks = "\n".join(
        "try:\n"
        "    async def attempt():\n"
        + "".join(f"        {line}\n" for line in source.splitlines())
        + f"    results[{name!r}] = 'ran: ' + str(await attempt())\n"
        f"except ImportError as exc:\n"
        f"    results[{name!r}] = 'refused: ' + str(exc)\n"
        for name, source in BORROWED.items()
    )
    program = (
        "import json\nresults = {}\n"
        # Codec lookups import modules the zygote never loaded: the import
        # system runs their bodies, and their imports are trusted.
        "results['lazy'] = 'bücher.de'.encode('idna').decode() + ' '\n"
        "results['lazy'] += 'é'.encode('mac-roman').hex()\n"
        f"{checks}\nreturn results"
    )
    async with SubprocessRuntime(spares=0, limits=Limits(timeout=20)) as runtime:
        outcome = await runtime.run(program, tool_names=[], call_tool=ToolBox())
    assert outcome.ok, outcome.message
    results = outcome.result
    assert results.pop("lazy") == "xn--bcher-kva.de 8e"
    assert results == {
        name: "refused: import of 'os' is not allowed in the program" for name in BORROWED
    }


@pytest.mark.anyio
async def test_imports_that_c_code_makes_for_an_allowed_module_work_in_a_worker() -> None:
    # datetime's and time's C code import _strptime with the program's frame on top.
    program = (
        "import datetime, time\n"
        "return [datetime.datetime.strptime('2024-01-02', '%Y-%m-%d').isoformat(),\n"
        "        time.strptime('2024', '%Y').tm_year]"
    )
    async with SubprocessRuntime(spares=0, limits=Limits(timeout=20)) as runtime:
        outcome = await runtime.run(program, tool_names=[], call_tool=ToolBox())
    assert outcome.ok, outcome.message
    assert outcome.result == ["2024-01-02T00:00:00", 2024]


def test_a_module_imported_for_an_owner_is_refused_without_the_owner() -> None:
    from runtime._worker._imports import check_program_import

    check_program_import("_strptime", (), 0, frozenset({"datetime"}))
    with pytest.raises(ImportError):
        check_program_import("_strptime", (), 0, frozenset({"json"}))
