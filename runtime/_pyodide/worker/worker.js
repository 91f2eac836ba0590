// The Deno side of a ptc-runner Pyodide worker.
//
// Usage (the host builds this command line; see runtime/_pyodide/_deno.py):
//   deno run --no-prompt --allow-read=<assets>,<this dir>,<runtime/_worker/_program.py>,<runtime/_worker/_wire.py> worker.js serve <assets> [<snapshot>]
//   deno run --no-prompt --allow-read=<assets>,<this dir>,<runtime/_worker/_program.py>,<runtime/_worker/_wire.py> worker.js snapshot <assets>
//
// "serve" loads one fresh Pyodide instance, locks the realm down (lockDown),
// announces it with a READY frame and serves exactly one run ("serve-unlocked":
// the same without lockDown, for the tests that prove Deno's permissions hold
// by themselves). "snapshot" writes a Pyodide memory snapshot (taken after
// bootstrap.py is imported) to stdout as raw bytes and exits.
//
// Frames on stdin/stdout (both one end of a socket pair the host holds the
// other end of): a 4-byte big-endian length, then that many bytes of UTF-8
// JSON (runtime/_worker/_protocol.py). This script only moves frames and schedules;
// bootstrap.py gives the frames meaning. It hands this script the JSON text of
// its frames (several joined by "\n" leave in one write) and this script frames
// them. While a tool call is unanswered and nothing else is due, stdin is read
// blocking (see mayBlock): the answer is then handled without a trip through
// the event loop and its reader thread.
//
// Security: everything here runs in the same JS realm as the untrusted Python
// program (it can reach globalThis through `import js`). Nothing in this file
// is a boundary; the walls are Deno's permission system (no net, run, env,
// write, ffi or sys; read limited to the assets) and the host, which treats
// every byte on stdout as hostile. Before the first host frame is read,
// lockDown() leaves the realm only the language's own globals and the few
// web APIs Pyodide uses: no `Deno`, storage, workers, network or host facts
// (see there). What this script needs of Deno afterwards is taken here.

const MAX_FRAME = 1 << 30;
const { stdout, stdin, stderr, exit: exitProcess, args: ARGS } = Deno;
const DENO_VERSION = Deno.version.deno;
const timeoutSignal = AbortSignal.timeout.bind(AbortSignal);
const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

function writeAll(bytes) {
  let offset = 0;
  while (offset < bytes.length) {
    offset += stdout.writeSync(bytes.subarray(offset));
  }
}

const NEWLINE = 10;
const CALL_PREFIX = encoder.encode('{"type":"call"');
let callsSent = 0;

function isCall(body, start) {
  for (let i = 0; i < CALL_PREFIX.length; i++) {
    if (body[start + i] !== CALL_PREFIX[i]) return false;
  }
  return true;
}

// Frames from their JSON texts joined by "\n" (JSON text never holds a raw
// newline), written at once. Call frames are counted (see mayBlock).
function sendFrames(text) {
  const [out, calls] = encodeFrames(text);
  callsSent += calls;
  writeAll(out);
}

// The bytes of those frames and how many of them are calls.
function encodeFrames(text) {
  const body = encoder.encode(String(text));
  let count = 1;
  for (let i = body.indexOf(NEWLINE); i !== -1; i = body.indexOf(NEWLINE, i + 1)) count++;
  // Each part gains a 4-byte header and loses its separator.
  const out = new Uint8Array(body.length + 3 * count + 1);
  const view = new DataView(out.buffer);
  let start = 0;
  let at = 0;
  let calls = 0;
  for (;;) {
    let end = body.indexOf(NEWLINE, start);
    if (end === -1) end = body.length;
    view.setUint32(at, end - start, false);
    out.set(body.subarray(start, end), at + 4);
    at += 4 + end - start;
    if (end - start >= CALL_PREFIX.length && isCall(body, start)) calls++;
    if (end === body.length) break;
    start = end + 1;
  }
  return [out, calls];
}

// Work handed to scheduleCallback that has not run yet (ready Python
// callbacks and timers), and the frames read from the host.
let scheduled = 0;
let framesReceived = 0;

// Whether the next read may block the thread: only while a tool call is
// unanswered (after "run", every host frame answers one) and no Python
// callback or timer is waiting, so nothing could run before the answer
// anyway. A blocking read skips the event loop's round trip through a
// reader thread. (JS timers the program starts through `import js` wait
// for the next answer then; they only ever delay the program itself.)
function mayBlock() {
  return scheduled === 0 && framesReceived > 0 && callsSent >= framesReceived;
}

// Read frames from stdin and hand each to onFrame; returns at end of input.
async function serveFrames(onFrame) {
  let buffer = new Uint8Array(1 << 16);
  let filled = 0;
  for (;;) {
    let offset = 0;
    while (filled - offset >= 4) {
      const length = new DataView(buffer.buffer, buffer.byteOffset + offset).getUint32(0, false);
      if (length > MAX_FRAME) throw new Error("frame too large");
      if (filled - offset < 4 + length) break;
      const text = decoder.decode(buffer.subarray(offset + 4, offset + 4 + length));
      offset += 4 + length;
      framesReceived++;
      onFrame(text);
    }
    if (offset > 0) {
      buffer.copyWithin(0, offset, filled);
      filled -= offset;
    }
    if (filled === buffer.length) {
      const grown = new Uint8Array(buffer.length * 2);
      grown.set(buffer.subarray(0, filled));
      buffer = grown;
    }
    let n;
    // Microtasks queued by now (say, a settled JS promise the program awaits)
    // run first; whatever they schedule rules out blocking.
    if (mayBlock()) await null;
    if (mayBlock()) {
      try {
        n = stdin.readSync(buffer.subarray(filled));
      } catch {
        n = undefined; // not a blocking descriptor after all: read as usual
      }
    }
    if (n === undefined) n = await stdin.read(buffer.subarray(filled));
    if (n === null) return;
    filled += n;
  }
}

// Pyodide's event loop schedules every callback as a macrotask (setImmediate
// here, ~40 us or far more under load). Most can run as microtasks; every 256th
// waits for a macrotask so frame reads and timers are never starved.
// bootstrap.py routes the event loop's timers (call_later) here too.
let burst = 0;
function scheduleCallback(callback, delay = 0) {
  scheduled++;
  const run = () => {
    scheduled--;
    callback();
  };
  if (delay > 0) {
    setTimeout(run, delay);
    return;
  }
  if (burst === 0) setImmediate(() => (burst = 0));
  if (++burst <= 256) queueMicrotask(run);
  else setImmediate(run);
}

// Pyodide reads and compiles its wasm module only after its JS modules are
// loaded and parsed. Here the read and the (background) compile start first
// and overlap that; the patched loader takes the module through its
// `_wasmModule` option instead of reading the file again. The read is
// synchronous (a few ms): an async read would complete only when the main
// thread next yields, after the loaders have been parsed and run, and the
// compile would start ~100 ms late. (Streaming the compile from the file was
// slower: Deno loads its streams and fetch code for it, and feeds the chunks
// on the main thread.)
async function compileEarly(assets) {
  return await WebAssembly.compile(Deno.readFileSync(`${assets}/pyodide.asm.wasm`));
}

// The installer stores snapshots sparse (runtime/_pyodide/_install.py, sparse_snapshot):
// the all-zero 64 KiB pages of the wasm memory are left out, about half of it.
// Pyodide's loader hands the memory part here instead of copying it whole.
// Memory above the allocator's break has not been written since the module
// was instantiated, so it is still zero there and zero pages are skipped; below
// the break they are cleared. A snapshot without the mark is copied as is.
const SPARSE_MAGIC = 0x53435450;
function restoreMemory(Module, memory) {
  const heap = Module.HEAPU8;
  const head = new Uint32Array(memory.buffer, memory.byteOffset, 4);
  if (head[0] !== SPARSE_MAGIC) {
    heap.set(memory);
    return;
  }
  const [, size, page, count] = head;
  const runs = new Uint32Array(memory.buffer, memory.byteOffset + 16, 2 * count);
  const brk = Module.HEAPU32[Module._emscripten_get_sbrk_ptr() >>> 2];
  if (size > heap.length || brk > heap.length) throw new Error("snapshot larger than the wasm memory");
  let at = 16 + 8 * count;
  let done = 0;
  for (let i = 0; i < count; i++) {
    const first = runs[2 * i] * page;
    const end = Math.min(first + runs[2 * i + 1] * page, size);
    if (first < done || end <= first || at + end - first > memory.length) throw new Error("corrupt snapshot");
    heap.fill(0, Math.min(done, brk), Math.min(first, brk));
    heap.set(memory.subarray(at, at + end - first), first);
    at += end - first;
    done = end;
  }
  heap.fill(0, Math.min(done, brk), Math.min(size, brk));
}

async function load(assets, snapshotPath, makeSnapshot) {
  const wasmModule = compileEarly(assets);
  wasmModule.catch(() => {}); // reported where the loader awaits it
  const snapshotBytes = snapshotPath ? Deno.readFile(snapshotPath) : undefined;
  const lockFile = Deno.readTextFile(`${assets}/pyodide-lock.json`).then(JSON.parse);
  // The installer's patched copies of Pyodide's loaders (runtime/_pyodide/_assets.py):
  // they skip Deno's Node compatibility layer. Both are imported at once here;
  // Pyodide would import the second only after the first had run.
  const [{ loadPyodide }, { default: createPyodideModule }] = await Promise.all(
    ["pyodide.deno.mjs", "pyodide.asm.deno.mjs"].map((name) => import(new URL(`file://${assets}/${name}`).href)),
  );
  const stray = (line) => console.error(line);
  return await loadPyodide({
    indexURL: `${assets}/`,
    // Read above, in parallel (Pyodide would read it only when configured);
    // packages resolve next to it, as when Pyodide reads it itself.
    lockFileContents: lockFile,
    packageBaseUrl: `${assets}/`,
    _loadSnapshot: snapshotBytes,
    _restoreMemory: restoreMemory,
    _makeSnapshot: makeSnapshot,
    stdout: stray,
    stderr: stray,
    env: { HOME: "/home/pyodide" },
    checkAPIVersion: true,
    createPyodideModule,
    _wasmModule: wasmModule,
  });
}

// Python source shipped beside this script, loaded as a module of its own.
// runtime/_worker/_program.py (the program semantics) and _wire.py (the lossless
// JSON check and the output accounting), shared with the CPython worker, come
// first: bootstrap.py imports them.
const MODULES = [
  ["_ptc_program", "../../_worker/_program.py", "<ptc-program>"],
  ["_ptc_wire", "../../_worker/_wire.py", "<ptc-wire>"],
  ["_ptc_bootstrap", "./bootstrap.py", "<ptc-bootstrap>"],
];

async function bootstrapModule(pyodide) {
  const sys = pyodide.pyimport("sys");
  for (const [name, path, filename] of MODULES) {
    if (sys.modules.has(name)) continue;
    const source = await Deno.readTextFile(new URL(path, import.meta.url));
    pyodide.runPython(
      "import sys, types\n" +
        "module = types.ModuleType(name)\n" +
        "sys.modules[name] = module\n" +
        "exec(compile(source, filename, 'exec'), module.__dict__)\n",
      { globals: pyodide.toPy({ source, name, filename }) },
    );
  }
  return pyodide.pyimport("_ptc_bootstrap");
}

// A fresh instance runs its first program on baseline-compiled wasm. While it
// waits for its run, exercise the hot paths in short slices so V8 tiers them
// up; stop as soon as the run arrives (or after WARM_UP_MS). A cold start's
// run arrives right after READY, within the grace period: no warm-up then.
// The grace period is timed by an AbortSignal: Deno's setTimeout loads its
// Node timers on first use (~10 ms), which a cold start's run would wait for.
const WARM_UP_GRACE_MS = 25;
const WARM_UP_MS = 400;
async function warmUp(boot, started) {
  await new Promise((resolve) => {
    timeoutSignal(WARM_UP_GRACE_MS).addEventListener("abort", resolve, { once: true });
  });
  const until = performance.now() + WARM_UP_MS;
  while (!started() && performance.now() < until) {
    boot.warm_up(encodeFrames);
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
}

// The globals a program keeps: the language's own, and the web APIs Pyodide
// and this script use while a program runs (timers, text codecs, clocks,
// random bytes). Everything else Deno puts on globalThis goes before the
// program runs: an allow-list, so a global a later Deno adds is gone too.
const KEEP_GLOBALS = new Set([
  // ECMAScript
  "globalThis", "Infinity", "NaN", "undefined", "eval", "isFinite", "isNaN", "parseFloat", "parseInt",
  "decodeURI", "decodeURIComponent", "encodeURI", "encodeURIComponent", "escape", "unescape",
  "Object", "Function", "Array", "Number", "Boolean", "String", "Symbol", "BigInt", "Date", "RegExp",
  "Promise", "Proxy", "Reflect", "JSON", "Math", "Intl", "Atomics", "Iterator", "Temporal",
  "Error", "AggregateError", "EvalError", "RangeError", "ReferenceError", "SyntaxError", "TypeError",
  "URIError", "SuppressedError", "Map", "Set", "WeakMap", "WeakSet", "WeakRef", "FinalizationRegistry",
  "DisposableStack", "AsyncDisposableStack", "ArrayBuffer", "SharedArrayBuffer", "DataView",
  "Int8Array", "Uint8Array", "Uint8ClampedArray", "Int16Array", "Uint16Array", "Int32Array",
  "Uint32Array", "Float16Array", "Float32Array", "Float64Array", "BigInt64Array", "BigUint64Array",
  "WebAssembly",
  // web APIs without host capabilities
  "console", "queueMicrotask", "setTimeout", "clearTimeout", "setInterval", "clearInterval",
  "setImmediate", "clearImmediate", "structuredClone", "atob", "btoa", "TextEncoder", "TextDecoder",
  "URL", "URLSearchParams", "DOMException", "Event", "EventTarget", "performance", "crypto", "Crypto",
  "SubtleCrypto", "CryptoKey",
]);

// Console output would corrupt the frame stream: every console method writes
// to stderr, which the host keeps as the program's output (never as its own words).
function quietConsole(original) {
  const write = (...args) => {
    try {
      stderr.writeSync(encoder.encode(args.map(String).join(" ") + "\n"));
    } catch {
      // stderr closed: nothing to report to.
    }
  };
  const replacement = {};
  for (const name of Object.keys(original)) {
    if (typeof original[name] === "function") replacement[name] = write;
  }
  return replacement;
}

// Leave the realm only what a program may use: called once Pyodide is loaded
// and before the first host frame (the program) is read. Removed: `Deno` (and
// with it `Deno.exit`, `Deno[Deno.internal]`, the host's paths, pid and
// arguments), Node's `process` (its `vm` evaluates strings despite the
// code-generation flag), web storage and the Cache API (they persist in the
// Deno directory), workers (they run data: and blob: URLs), network, GPU,
// `navigator`, `location`, `prompt` (it reads the channel). Stack traces are
// the error's first line only (no frames, so no file paths), by a formatter
// the program cannot replace. Throws if something cannot be removed: the
// worker then never gets a program.
function lockDown() {
  for (const key of Reflect.ownKeys(globalThis)) {
    // Symbol keys are Deno's own bookkeeping of globalThis as an event target.
    if (typeof key === "symbol" || KEEP_GLOBALS.has(key)) continue;
    if (!Reflect.deleteProperty(globalThis, key)) throw new Error(`cannot remove the global ${key}`);
  }
  for (const name of ["createObjectURL", "revokeObjectURL"]) {
    if (!Reflect.deleteProperty(URL, name)) throw new Error(`cannot remove URL.${name}`);
  }
  const fixed = (value) => ({ value, writable: false, enumerable: false, configurable: false });
  Object.defineProperty(globalThis, "console", fixed(globalThis.console));
  // (Error.stackTraceLimit stays writable: Pyodide raises it for a moment.)
  Object.defineProperty(Error, "prepareStackTrace", fixed(stackWithoutFrames));
}

const apply = Reflect.apply;
const errorToString = Error.prototype.toString;
function stackWithoutFrames(error) {
  try {
    return apply(errorToString, error, []);
  } catch {
    return "Error";
  }
}

// Pyodide's configuration keeps the directory it was loaded from (the host's
// cache, in a user's home): once loaded, it names a neutral one instead
// (Pyodide reads nothing more from there; packages cannot be loaded anyway).
const NEUTRAL_ASSETS = "/pyodide/";
function forgetAssetPaths(pyodide, assets) {
  const api = pyodide._api;
  for (const holder of [api?.config, api?.packageManager]) {
    if (holder === null || typeof holder !== "object") continue;
    for (const key of Object.keys(holder)) {
      const descriptor = Object.getOwnPropertyDescriptor(holder, key);
      if (typeof descriptor?.value === "string" && descriptor.value.includes(assets)) {
        holder[key] = descriptor.value.replaceAll(`${assets}/`, NEUTRAL_ASSETS).replaceAll(assets, NEUTRAL_ASSETS);
      }
    }
  }
}

async function serve(assets, snapshotPath, locked) {
  const pyodide = await load(assets, snapshotPath, false);
  const boot = await bootstrapModule(pyodide);
  forgetAssetPaths(pyodide, assets);
  const layers = [
    ["wasm", true, `CPython in Pyodide ${pyodide.version} (WebAssembly)`],
    ["deno-permissions", true, `Deno ${DENO_VERSION}: read-only assets; no net, run, env, write, ffi or sys`],
    locked
      ? ["js-globals", true, "no Deno namespace, web storage, workers, network or host information"]
      : ["js-globals", false, "switched off (lockdown=False): the program sees all of Deno's API"],
  ];
  globalThis.console = quietConsole(globalThis.console);
  if (locked) lockDown();
  const onFrame = boot.attach(sendFrames, JSON.stringify(layers), scheduleCallback);
  let started = false;
  warmUp(boot, () => started);
  await serveFrames((text) => {
    started = true;
    onFrame(text);
  });
  exitProcess(0);
}

async function snapshot(assets) {
  const pyodide = await load(assets, undefined, true);
  await bootstrapModule(pyodide);
  writeAll(pyodide.makeMemorySnapshot());
}

const [mode, assets, snapshotPath] = ARGS;
try {
  if (mode === "serve" || mode === "serve-unlocked") await serve(assets, snapshotPath || undefined, mode === "serve");
  else if (mode === "snapshot") await snapshot(assets);
  else throw new Error(`unknown mode ${mode}`);
} catch (error) {
  console.error(`ptc pyodide worker: ${error?.stack ?? error}`);
  exitProcess(70);
}
