// The Deno side of a ptc-runner Pyodide worker.
//
// Usage (the host builds this command line; see runtime/_pyodide_worker.py):
//   deno run --no-prompt --allow-read=<assets>,<this dir> worker.js serve <assets> [<snapshot>]
//   deno run --no-prompt --allow-read=<assets>,<this dir> worker.js snapshot <assets>
//
// "serve" loads one fresh Pyodide instance, announces it with a READY frame and
// serves exactly one run. "snapshot" writes a Pyodide memory snapshot (taken
// after bootstrap.py is imported) to stdout as raw bytes and exits.
//
// Frames on stdin/stdout (both one end of a socket pair the host holds the
// other end of): a 4-byte big-endian length, then that many bytes of UTF-8
// JSON (runtime/_protocol.py). This script only moves frames and schedules;
// bootstrap.py gives the frames meaning.
//
// Security: everything here runs in the same JS realm as the untrusted Python
// program (it can reach globalThis through `import js`). Nothing in this file
// is a boundary; the walls are Deno's permission system (no net, run, env,
// write, ffi or sys; read limited to the assets) and the host, which treats
// every byte on stdout as hostile.

const MAX_FRAME = 1 << 30;
const stdout = Deno.stdout;
const stdin = Deno.stdin;
const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

function writeAll(bytes) {
  let offset = 0;
  while (offset < bytes.length) {
    offset += stdout.writeSync(bytes.subarray(offset));
  }
}

// One frame from its JSON text, or (a Uint8Array) frames already framed.
function sendFrame(text) {
  if (text instanceof Uint8Array) {
    writeAll(text);
    return;
  }
  const body = encoder.encode(text);
  const frame = new Uint8Array(4 + body.length);
  new DataView(frame.buffer).setUint32(0, body.length, false);
  frame.set(body, 4);
  writeAll(frame);
}

async function* readFrames() {
  let buffer = new Uint8Array(1 << 16);
  let filled = 0;
  for (;;) {
    while (filled >= 4) {
      const length = new DataView(buffer.buffer, buffer.byteOffset).getUint32(0, false);
      if (length > MAX_FRAME) throw new Error("frame too large");
      if (filled < 4 + length) break;
      yield decoder.decode(buffer.subarray(4, 4 + length));
      buffer.copyWithin(0, 4 + length, filled);
      filled -= 4 + length;
    }
    if (filled === buffer.length) {
      const grown = new Uint8Array(buffer.length * 2);
      grown.set(buffer.subarray(0, filled));
      buffer = grown;
    }
    const n = await stdin.read(buffer.subarray(filled));
    if (n === null) return;
    filled += n;
  }
}

// Pyodide's event loop schedules every callback as a macrotask (setImmediate
// here, ~40 us or far more under load). Most can run as microtasks; every 256th
// waits for a macrotask so frame reads and timers are never starved.
let burst = 0;
function scheduleCallback(callback, delay = 0) {
  if (delay > 2) {
    setTimeout(callback, delay);
    return;
  }
  if (burst === 0) setImmediate(() => (burst = 0));
  if (++burst <= 256) queueMicrotask(callback);
  else setImmediate(callback);
}

async function load(assets, snapshotPath, makeSnapshot) {
  const { loadPyodide } = await import(new URL(`file://${assets}/pyodide.mjs`).href);
  const stray = (line) => console.error(line);
  return await loadPyodide({
    indexURL: `${assets}/`,
    // Reading the snapshot overlaps compiling the wasm module.
    _loadSnapshot: snapshotPath ? Deno.readFile(snapshotPath) : undefined,
    _makeSnapshot: makeSnapshot,
    stdout: stray,
    stderr: stray,
    env: { HOME: "/home/pyodide" },
    checkAPIVersion: true,
  });
}

async function bootstrapModule(pyodide) {
  const sys = pyodide.pyimport("sys");
  if (!sys.modules.has("_ptc_bootstrap")) {
    const source = await Deno.readTextFile(new URL("./bootstrap.py", import.meta.url));
    pyodide.runPython(
      "import sys, types\n" +
        "module = types.ModuleType('_ptc_bootstrap')\n" +
        "exec(compile(source, '<ptc-bootstrap>', 'exec'), module.__dict__)\n" +
        "sys.modules['_ptc_bootstrap'] = module\n",
      { globals: pyodide.toPy({ source }) },
    );
  }
  return pyodide.pyimport("_ptc_bootstrap");
}

// A fresh instance runs its first program on baseline-compiled wasm. While it
// waits for its run, exercise the hot paths in short slices so V8 tiers them
// up; stop as soon as the run arrives (or after WARM_UP_MS). A cold start's
// run arrives right after READY, within the grace period: no warm-up then.
const WARM_UP_GRACE_MS = 25;
const WARM_UP_MS = 400;
async function warmUp(boot, started) {
  await new Promise((resolve) => setTimeout(resolve, WARM_UP_GRACE_MS));
  const until = performance.now() + WARM_UP_MS;
  while (!started() && performance.now() < until) {
    boot.warm_up();
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
}

async function serve(assets, snapshotPath) {
  const pyodide = await load(assets, snapshotPath, false);
  const boot = await bootstrapModule(pyodide);
  // Console output would corrupt the frame stream; route it to stderr.
  for (const name of ["log", "info", "debug", "warn", "error", "trace", "dir", "table"]) {
    console[name] = (...args) => {
      try {
        Deno.stderr.writeSync(encoder.encode(args.map(String).join(" ") + "\n"));
      } catch {
        // stderr closed: nothing to report to.
      }
    };
  }
  const layers = [
    ["wasm", true, `CPython in Pyodide ${pyodide.version} (WebAssembly)`],
    ["deno-permissions", true, `Deno ${Deno.version.deno}: read-only assets; no net, run, env, write, ffi or sys`],
  ];
  const onFrame = boot.attach(sendFrame, JSON.stringify(layers), scheduleCallback);
  let started = false;
  warmUp(boot, () => started);
  for await (const text of readFrames()) {
    started = true;
    onFrame(text);
  }
  Deno.exit(0);
}

async function snapshot(assets) {
  const pyodide = await load(assets, undefined, true);
  await bootstrapModule(pyodide);
  writeAll(pyodide.makeMemorySnapshot());
}

const [mode, assets, snapshotPath] = Deno.args;
try {
  if (mode === "serve") await serve(assets, snapshotPath || undefined);
  else if (mode === "snapshot") await snapshot(assets);
  else throw new Error(`unknown mode ${mode}`);
} catch (error) {
  console.error(`ptc pyodide worker: ${error?.stack ?? error}`);
  Deno.exit(70);
}
