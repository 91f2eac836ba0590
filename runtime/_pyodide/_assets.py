"""Where the Pyodide runtime's pieces live: Deno, the pinned assets, the snapshot.

Nothing here downloads; :mod:`runtime._pyodide._install` does, once, on an explicit
command. At run time a missing piece raises :class:`PyodideNotInstalledError`
naming that command.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .._exceptions import PYODIDE_EXTRA, PYODIDE_INSTALL_COMMAND, PyodideNotInstalledError

__all__ = [
    "ASSET_FILES",
    "INSTALL_COMMAND",
    "LOADER_FILES",
    "PROGRAM_MODULE",
    "PYODIDE_INTEGRITY",
    "PYODIDE_VERSION",
    "REALM_STATE",
    "SHARED_MODULES",
    "STORAGE_STATE",
    "WORKER_DIR",
    "PyodideInstall",
    "PyodideNotInstalledError",
    "asset_dir",
    "cache_root",
    "find_deno",
    "locate_pyodide",
    "pyodide_status",
    "snapshot_path",
    "worker_command",
]

#: The pinned npm ``pyodide`` release and its registry integrity (SRI, sha512).
PYODIDE_VERSION = "314.0.7"
PYODIDE_INTEGRITY = "sha512-0YvXxEhfEdpLfb/XkM2BFAeMROq0iMUX2bzzH9pOttyMcWkwq+HbE5uyuGD82LN7y2q+SNvi/6V5JEsOlD2R1A=="
#: The files of the npm package a worker needs (everything else is left out).
ASSET_FILES = (
    "package.json",
    "pyodide-lock.json",
    "pyodide.asm.mjs",
    "pyodide.asm.wasm",
    "pyodide.mjs",
    "python_stdlib.zip",
)
#: Pyodide's two JS loaders and the patched copies the installer derives from them
#: (see :func:`patch_loader`); ``worker.js`` loads only the copies.
LOADER_FILES = {"pyodide.mjs": "pyodide.deno.mjs", "pyodide.asm.mjs": "pyodide.asm.deno.mjs"}
# Pyodide runs on Deno through Deno's Node compatibility layer: it takes Deno for
# Node, and touching `process` and importing node:fs, node:url, node:vm,
# node:path, node:module and node:tty makes Deno parse its Node polyfills at
# every start (60-90 ms of a ~500 ms cold start). The copies take the plain
# JS-shell code paths instead, with Deno's own file reads where the shell paths
# would call d8's `readbuffer`/`read`, and Web Crypto for random bytes (not d8's
# `os.system`). Each pair must match exactly once in the pinned release, or
# the install fails. Nothing here widens what the worker may do: the reads stay
# under Deno's --allow-read, and the Node paths dropped include child_process.
_INTERNAL_SYMBOLS = ",".join(
    f'"{name}"'
    for name in (
        "memory",
        "__memory_base",
        "__table_base",
        "__stack_pointer",
        "__indirect_function_table",
        "__cpp_exception",
        "__c_longjmp",
        "__wasm_apply_data_relocs",
        "__dso_handle",
        "__tls_size",
        "__tls_align",
        "__set_stack_limits",
        "_emscripten_tls_init",
        "__wasm_init_tls",
        "__wasm_call_ctors",
        "__start_em_asm",
        "__stop_em_asm",
        "__start_em_js",
        "__stop_em_js",
    )
)
_LOADER_PATCHES: dict[str, tuple[tuple[str, str], ...]] = {
    "pyodide.mjs": (
        (
            'n=typeof process=="object"&&typeof process.versions=="object"'
            '&&typeof process.versions.node=="string"&&!process.browser,',
            "n=!1,",
        ),
        ('s=typeof read=="function"&&typeof load=="function"', "s=!0"),
        (
            "return{binary:Promise.resolve(new Uint8Array(readbuffer(e)))}",
            "return{binary:Deno.readFile(e)}",
        ),
        # The snapshot is needed only once the module is instantiated and
        # linked: read it meanwhile instead of first (noInitialRun must still be
        # set before the module is created).
        (
            "async function ke(e,t){if(!e._loadSnapshot)return;let n=",
            "async function ke(e,t){if(!e._loadSnapshot)return;t.noInitialRun=!0;let n=",
        ),
        (
            "s=await ke(t,n),r=await Re(i,n);Fe(r,t);let a=Ae(r,s,t);",
            "s=ke(t,n);s.catch(()=>{});let r=await Re(i,n);Fe(r,t);let a=Ae(r,await s,t);",
        ),
        # A `_wasmModule` option (a promise of the compiled module, which
        # worker.js starts compiling first thing) replaces Pyodide's own read
        # and compile of pyodide.asm.wasm.
        ("instantiateWasm:Ie(e.indexURL)", "instantiateWasm:Ie(e.indexURL,e._wasmModule)"),
        (
            'function Ie(e){if(typeof WasmOffsetConverter<"u")return;'
            'let{binary:t,response:n}=_(e+"pyodide.asm.wasm")',
            'function Ie(e,m){if(typeof WasmOffsetConverter<"u")return;'
            'let{binary:t,response:n}=m?{}:_(e+"pyodide.asm.wasm")',
        ),
        (
            "n?l=await WebAssembly.instantiateStreaming(n,s):",
            "m?l={module:await m,instance:await WebAssembly.instantiate(await m,s)}:"
            "n?l=await WebAssembly.instantiateStreaming(n,s):",
        ),
    ),
    "pyodide.asm.mjs": (
        (
            "var ENVIRONMENT_IS_NODE=globalThis.process?.versions?.node"
            '&&globalThis.process?.type!="renderer";',
            "var ENVIRONMENT_IS_NODE=false;",
        ),
        (
            "readBinary=f=>{if(globalThis.readbuffer){return new Uint8Array(readbuffer(f))}",
            "readBinary=f=>{if(true){return Deno.readFileSync(f)}",
        ),
        (
            "return{binary:Promise.resolve(new Uint8Array(readbuffer(t)))}",
            "return{binary:Deno.readFile(t)}",
        ),
        # Reading Deno's setTimeout, clearTimeout or setImmediate loads its Node
        # timers (~10 ms). Module start-up reads them only to see whether they
        # exist (`in` tells without the load) and to alias clearTimeout (a
        # wrapper reads it when called); the first timer a program sets loads them.
        (
            "globalThis.clearTimeout??=id=>{};globalThis.setTimeout??=f=>f();",
            '"clearTimeout"in globalThis||(globalThis.clearTimeout=id=>{});'
            '"setTimeout"in globalThis||(globalThis.setTimeout=f=>f());',
        ),
        (
            "if(globalThis.setImmediate){emSetImmediate=setImmediateWrapped;",
            'if("setImmediate"in globalThis){emSetImmediate=setImmediateWrapped;',
        ),
        (
            "var _emscripten_clear_timeout=clearTimeout;",
            "var _emscripten_clear_timeout=id=>clearTimeout(id);",
        ),
        (
            "if(ENVIRONMENT_IS_SHELL){return view=>{if(!os.system)",
            "if(false){return view=>{if(!os.system)",
        ),
        # Linking gives ~260 JS functions a wasm wrapper, compiling a one-function
        # module for each; the module depends only on the signature, so reuse it.
        (
            "var module=new WebAssembly.Module(bytes);var instance=",
            "var module=(convertJsFunctionToWasm.modules??={})[sig]??=new WebAssembly.Module(bytes);"
            "var instance=",
        ),
        # The memory part of a snapshot goes to the loader's `_restoreMemory`
        # option when given (worker.js: the installer's sparse snapshots).
        (
            "t=t.subarray(r);let s=(new TextDecoder).decode(i),l=JSON.parse(s);"
            "return Module.HEAP8.set(t),l};",
            "t=t.subarray(r);let s=(new TextDecoder).decode(i),l=JSON.parse(s);"
            "return API.config._restoreMemory?API.config._restoreMemory(Module,t):"
            "Module.HEAP8.set(t),l};",
        ),
        # Written as a parenthesized function expression, the module's one huge
        # function is compiled when the module is, so it lands in Deno's code
        # cache; as a declaration it was parsed again on every start (~50 ms).
        (
            "async function _createPyodideModule(moduleArg={}){",
            "var _createPyodideModule=(async function(moduleArg={}){",
        ),
        (
            ";return moduleRtn}export default _createPyodideModule;",
            ";return moduleRtn});export default _createPyodideModule;",
        ),
        # The same for the function that stores the ~8,500 wasm exports
        # (~390 KB of source, ~25 ms to compile at each start). It is assigned
        # before createWasm() runs, the one place that calls it.
        (
            "function assignWasmExports(wasmExports){",
            "var assignWasmExports=(function(wasmExports){",
        ),
        (
            '["in6addr_loopback"].value>>>0}var wasmImports={',
            '["in6addr_loopback"].value>>>0});var wasmImports={',
        ),
        # Linking walks ~8,500 exports and GOT entries: without a [key, value]
        # array per entry.
        (
            "var mergeLibSymbols=(exports,libName)=>{for(var[sym,exp]of Object.entries(exports)){",
            "var mergeLibSymbols=(exports,libName)=>{for(var sym in exports){let exp=exports[sym];",
        ),
        # Resolving the main module's GOT gives ~260 JS functions a table slot,
        # each through a wasm wrapper instantiated on its own, after a failed
        # attempt to store the JS function (a TypeError): ~15 ms. The wrappers
        # are made beforehand in one instance (same signatures, same calls).
        # Slots are still given out one by one in the same order; a function
        # the batch re-exports as itself is wasm and is stored as before; if
        # the batch fails, each wrapper is made as before.
        (
            "var reportUndefinedSymbols=()=>{for(var[symName,entry]of Object.entries(GOT)){",
            "var prewrapped=null;"
            "var prewrapLeb=n=>{var b=[];do{var x=n&127;n>>>=7;b.push(n?x|128:x)}while(n);return b};"
            "var prewrapSection=(id,items)=>{var body=[...prewrapLeb(items.length),...items.flat()];"
            "return[id,...prewrapLeb(body.length),...body]};"
            "var prewrapFunctions=()=>{var funcs=new Map;for(var symName in GOT){if(GOT[symName].value==-1){"
            "var f=resolveGlobalSymbol(symName,true).sym;"
            'if(typeof f=="function"&&typeof f.sig=="string"&&!funcs.has(f)&&!getFunctionAddress(f))'
            "funcs.set(f,f.sig)}}"
            "if(funcs.size<2)return;"
            "try{var types=[],typeIndex={},imports=[],exports=[],fs={},i=0;"
            "for(var[f,sig]of funcs){"
            "var t=typeIndex[sig]??=types.push([96,...generateTypePack(sig.slice(1)),"
            '...generateTypePack(sig[0]==="v"?"":sig[0])])-1;'
            "var name=Array.from(String(i),c=>c.charCodeAt(0));"
            "imports.push([1,101,name.length,...name,0,...prewrapLeb(t)]);"
            "exports.push([name.length,...name,0,...prewrapLeb(i)]);fs[i++]=f}"
            "var bytes=Uint8Array.from([0,97,115,109,1,0,0,0,...prewrapSection(1,types),"
            "...prewrapSection(2,imports),...prewrapSection(7,exports)]);"
            "var inst=new WebAssembly.Instance(new WebAssembly.Module(bytes),{e:fs});"
            "prewrapped=new Map;i=0;for(var[f,sig]of funcs)prewrapped.set(f,{sig,w:inst.exports[i++]})"
            "}catch{prewrapped=null}};"
            "var reportUndefinedSymbols=()=>{prewrapFunctions();"
            "try{reportUndefinedSymbolsNow()}finally{prewrapped=null}};"
            "var reportUndefinedSymbolsNow=()=>{for(var symName in GOT){var entry=GOT[symName];",
        ),
        (
            "try{setWasmTableEntry(ret,func)}catch(err){if(!(err instanceof TypeError)){throw err}"
            "var wrapped=convertJsFunctionToWasm(func,sig);setWasmTableEntry(ret,wrapped)}",
            "var pre=prewrapped?.get(func);if(pre&&pre.sig===sig&&pre.w!==func){prewrapped.delete(func);"
            "setWasmTableEntry(ret,pre.w)}else "
            "try{setWasmTableEntry(ret,func)}catch(err){if(!(err instanceof TypeError)){throw err}"
            "var wrapped=convertJsFunctionToWasm(func,sig);setWasmTableEntry(ret,wrapped)}",
        ),
        # Linking the main module gives each of its ~8,500 exports a GOT entry,
        # a WebAssembly.Global (~20 ms), but only the entries a library imports
        # (GOTHandler) or someone reads through Module.GOT are ever used. A new
        # entry's value is kept in `lazyGOT` until then and the Global made on
        # first use, holding the same value (the table slots are still given
        # out in the same order). Entries still unresolved (-1) stay eager:
        # reportUndefinedSymbols resolves those.
        ("var GOT={};", "var GOT={},lazyGOT=new Map;"),
        (
            "get(weakImports,symName){var rtn=GOT[symName];if(!rtn){rtn=GOT[symName]="
            'new WebAssembly.Global({value:"i32",mutable:true},-1)}',
            "get(weakImports,symName){var rtn=GOT[symName];if(!rtn){rtn=GOT[symName]="
            'new WebAssembly.Global({value:"i32",mutable:true},lazyGOT.get(symName)??-1);'
            "lazyGOT.delete(symName)}",
        ),
        (
            "var existingEntry=GOT[symName]&&GOT[symName].value!=-1;",
            "var existingEntry=GOT[symName]?GOT[symName].value!=-1:lazyGOT.has(symName);",
        ),
        (
            'GOT[symName]??=new WebAssembly.Global({value:"i32",mutable:true});'
            "GOT[symName].value=newValue}",
            "if(GOT[symName])GOT[symName].value=newValue;"
            "else if((newValue|=0)!==-1)lazyGOT.set(symName,newValue);"
            'else GOT[symName]=new WebAssembly.Global({value:"i32",mutable:true},-1)}',
        ),
        (
            'Module["GOT"]=GOT;',
            'Object.defineProperty(Module,"GOT",{configurable:true,enumerable:true,'
            "get(){for(var[s,v]of lazyGOT)"
            'GOT[s]=new WebAssembly.Global({value:"i32",mutable:true},v);'
            "lazyGOT.clear();return GOT},"
            'set(v){Object.defineProperty(Module,"GOT",{value:v,writable:true})}});',
        ),
        # Asked for each of ~8,500 exports: a Set instead of a fresh array per call.
        (
            "var isInternalSym=symName=>[" + _INTERNAL_SYMBOLS + "].includes(symName)",
            "var internalSyms=new Set([" + _INTERNAL_SYMBOLS + "]);"
            "var isInternalSym=symName=>internalSyms.has(symName)",
        ),
    ),
}
_LOADER_STAMP = "// ptc-runner: patched for Deno without Node compatibility, "


def loader_stamp() -> str:
    """The first line of a patched loader: names the patches it carries."""
    digest = hashlib.sha256(repr(sorted(_LOADER_PATCHES.items())).encode()).hexdigest()[:16]
    return f"{_LOADER_STAMP}{digest}\n"


def patch_loader(name: str, source: str) -> str:
    """The patched copy of the loader ``name`` (a key of :data:`LOADER_FILES`).

    Raises:
        ValueError: a patched spot is not found exactly once (another release).
    """
    for old, new in _LOADER_PATCHES[name]:
        if source.count(old) != 1:
            raise ValueError(f"{name}: expected one {old[:60]!r}, found {source.count(old)}")
        source = source.replace(old, new)
    return loader_stamp() + source


def loaders_current(assets: Path) -> bool:
    """Whether the patched loaders exist and carry the current patches."""
    stamp = loader_stamp().encode()
    for derived in LOADER_FILES.values():
        try:
            with open(assets / derived, "rb") as file:
                if file.readline() != stamp:
                    return False
        except OSError:
            return False
    return True


#: The Deno host script and the in-Pyodide bootstrap shipped with this package.
WORKER_DIR = Path(__file__).resolve().parent / "worker"
#: The program semantics shared with the CPython worker; ``worker.js`` loads it too.
PROGRAM_MODULE = Path(__file__).resolve().parent.parent / "_worker" / "_program.py"
#: What both ends of the channel check and count alike; ``worker.js`` loads it too.
WIRE_MODULE = PROGRAM_MODULE.with_name("_wire.py")
#: The CPython worker's sources ``worker.js`` loads: all it may read outside ``worker/``.
SHARED_MODULES = (PROGRAM_MODULE, WIRE_MODULE)
INSTALL_COMMAND = PYODIDE_INSTALL_COMMAND
#: What ``ptc doctor`` says of storage in a worker (``worker.js`` lockDown and
#: the worker's own home, ``runtime._pyodide._deno.make_home``).
STORAGE_STATE = (
    "off (no web storage, Cache API, KV or workers; each worker's Deno directory "
    "is its own and removed with it)"
)
#: What ``ptc doctor`` says of the JS realm a program gets.
REALM_STATE = "locked down before the program runs (no Deno API, network or host information)"
_EXTRA_HINT = PYODIDE_EXTRA


@dataclass(frozen=True, slots=True, kw_only=True)
class PyodideInstall:
    """The located pieces a worker is started from.

    Attributes:
        deno: path of the Deno executable.
        assets: directory holding :data:`ASSET_FILES` of :data:`PYODIDE_VERSION`.
        snapshot: the memory snapshot matching this version and bootstrap, if built.
        deno_dir: Deno's private cache directory (never the user's).
    """

    deno: Path
    assets: Path
    snapshot: Path | None
    deno_dir: Path


def cache_root() -> Path:
    """``$PTC_CACHE_DIR``, else ``$XDG_CACHE_HOME/ptc-runner``, else ``~/.cache/ptc-runner``."""
    explicit = os.environ.get("PTC_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return (Path(base).expanduser() / "ptc-runner").resolve()


def asset_dir(cache_dir: Path | None = None) -> Path:
    """The directory of the pinned Pyodide assets under ``cache_dir`` (or :func:`cache_root`)."""
    return (cache_dir or cache_root()) / "pyodide" / PYODIDE_VERSION


def snapshot_path(assets: Path) -> Path:
    """The snapshot file for this Pyodide version and the worker's sources.

    The sources are ``worker.js``, ``bootstrap.py``, the shared
    :data:`SHARED_MODULES` and the loader patches. The name carries a digest
    of them and the version, so changing any of them makes the old snapshot
    stale and the installer builds a new one.
    """
    digest = hashlib.sha256(PYODIDE_VERSION.encode())
    digest.update(loader_stamp().encode())
    for source in (WORKER_DIR / "worker.js", WORKER_DIR / "bootstrap.py", *SHARED_MODULES):
        digest.update(source.read_bytes())
    return assets / f"snapshot-{digest.hexdigest()[:16]}.bin"


def find_deno() -> Path | None:
    """The Deno binary: ``$PTC_DENO``, the PyPI ``deno`` package, then ``PATH``."""
    explicit = os.environ.get("PTC_DENO")
    if explicit:
        return Path(explicit) if Path(explicit).is_file() else None
    try:
        # The optional ``pyodide`` extra: the PyPI ``deno`` package ships the binary.
        deno = importlib.import_module("deno")
        return Path(deno.find_deno_bin())
    except (ImportError, FileNotFoundError, AttributeError):
        pass
    found = shutil.which("deno")
    return Path(found) if found else None


def worker_command(
    deno: Path, assets: Path, mode: str, *args: str, v8_flags: Sequence[str] = ()
) -> list[str]:
    """The ``deno run`` command line of ``worker.js``: the Pyodide sandbox boundary.

    Every Deno process of this backend starts from it (a worker in ``serve`` mode,
    the installer's ``snapshot`` build), so the permissions cannot drift apart:
    ``--no-prompt`` and no ``--allow-*`` flag but ``--allow-read`` of the assets,
    ``worker/`` and the two files of :data:`SHARED_MODULES` — net, run, env,
    write, ffi, sys and remote or npm imports stay denied — and no config file,
    lock file, npm or remote module. ``v8_flags`` (limits) go to V8; ``args`` follow the mode.
    """
    command = [
        str(deno),
        "run",
        "--no-prompt",
        "--no-config",
        "--no-lock",
        "--no-npm",
        "--no-remote",
        f"--allow-read={','.join(map(str, (assets, WORKER_DIR, *SHARED_MODULES)))}",
    ]
    if v8_flags:
        command.append(f"--v8-flags={','.join(v8_flags)}")
    return [*command, str(WORKER_DIR / "worker.js"), mode, str(assets), *args]


def _assets_complete(assets: Path) -> bool:
    return all((assets / name).is_file() for name in ASSET_FILES) and loaders_current(assets)


def locate_pyodide(cache_dir: Path | None = None) -> PyodideInstall:
    """Find Deno and the assets or raise :class:`PyodideNotInstalledError`."""
    deno = find_deno()
    if deno is None:
        raise PyodideNotInstalledError("no Deno executable found")
    assets = asset_dir(cache_dir)
    if not _assets_complete(assets):
        raise PyodideNotInstalledError(f"no Pyodide {PYODIDE_VERSION} assets in {assets}")
    snapshot = snapshot_path(assets)
    return PyodideInstall(
        deno=deno,
        assets=assets,
        snapshot=snapshot if snapshot.is_file() else None,
        deno_dir=(cache_dir or cache_root()) / "deno",
    )


def _deno_version(deno: Path) -> str:
    try:
        done = subprocess.run(
            [str(deno), "--version"], capture_output=True, text=True, timeout=20, check=True
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unusable ({exc})"
    return done.stdout.splitlines()[0] if done.stdout else "unknown"


def pyodide_status(cache_dir: Path | None = None) -> dict[str, str]:
    """What ``ptc doctor`` shows: each piece with its version or what is wrong.

    Keys: ``usable`` (``yes``/``no``), ``deno``, ``pyodide``, ``snapshot``,
    ``cache``, ``storage`` and ``realm`` (what every worker leaves a program,
    the same on every machine) and, when not usable, ``fix``.
    """
    deno = find_deno()
    assets = asset_dir(cache_dir)
    status = {
        "deno": f"{_deno_version(deno)} ({deno})" if deno else "missing",
        "pyodide": f"{PYODIDE_VERSION} ({assets})" if _assets_complete(assets) else "missing",
        "cache": str(cache_dir or cache_root()),
        "storage": STORAGE_STATE,
        "realm": REALM_STATE,
    }
    snapshot = snapshot_path(assets)
    if snapshot.is_file():
        status["snapshot"] = f"{snapshot.name} ({snapshot.stat().st_size // (1024 * 1024)} MiB)"
    else:
        status["snapshot"] = "missing (cold starts are slow)"
    usable = (
        deno is not None and status["deno"].split()[0] != "unusable" and _assets_complete(assets)
    )
    status["usable"] = "yes" if usable else "no"
    if deno is None:
        status["fix"] = f"{_EXTRA_HINT}, then {INSTALL_COMMAND}"
    elif not usable or not snapshot.is_file():
        status["fix"] = INSTALL_COMMAND
    return status
