"""Cold start of ``ptc run``: a fresh process to the first result, against ``python -c pass``.

Run by hand: ``python tests/benchmarks/bench_cold_start.py [--rounds N]``. Prints
the medians and their ratio to the floor, from one run, the commands taking
turns so that a change in the machine's load falls on all of them alike:

- the floor, ``python -c pass``;
- the floor of the stack every run stands on, before a line of ``ptc``: an
  interpreter that imports anyio and orjson (and what spawning a zygote
  needs: subprocess, socket, tempfile) and enters ``anyio.run`` once, which
  imports anyio's asyncio backend. The gap between it and ``ptc run`` (the
  last column) is what ``ptc``'s own code costs;
- the imports of the command line's commands, ``python -c "import ptc._commands"``
  (``ptc run`` spawns its zygote before them, so that its boot overlaps them);
- ``ptc run`` of a trivial program (``return 1``) on the bundled example tool set
  (subprocess runtime, strict isolation), end to end;
- ``ptc run`` of the README's first program, ``examples/programs/fanout_search.py``
  (its tools each wait 20 ms, as if over a network, in two rounds: 40 ms of it).

Bytecode is cached (in a temporary ``PYTHONPYCACHEPREFIX``, after warm-up runs)
as it is for an installed package, so the figures are a user's second and later
runs. ``--imports`` also prints the slowest imports (``python -X importtime``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOLS = str(ROOT / "examples" / "tools.py") + ":registry"
FANOUT = str(ROOT / "examples" / "programs" / "fanout_search.py")


def _ptc() -> list[str]:
    script = Path(sys.executable).with_name("ptc")
    return [str(script)] if script.exists() else [sys.executable, "-m", "ptc"]


#: The stack's floor (see the module docstring), with the cyclic GC off as ``ptc run`` has it.
_STACK = (
    "import gc;gc.disable();import anyio,orjson,subprocess,socket,tempfile\n"
    "async def main():\n    await anyio.sleep(0)\n"
    "anyio.run(main)"
)


def _commands(trivial: str) -> dict[str, list[str]]:
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "stack: anyio.run, orjson": [sys.executable, "-c", _STACK],
        "import ptc._commands": [sys.executable, "-c", "import ptc._commands"],
        "ptc run (return 1)": [*_ptc(), "run", trivial, "--tools", TOOLS, "-q"],
        "ptc run fanout_search.py": [*_ptc(), "run", FANOUT, "--tools", TOOLS, "-q"],
    }


def _once(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr.decode()}")
    return elapsed


def _slowest_imports(env: dict[str, str], count: int) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import ptc._commands"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    rows = []
    for line in done.stderr.splitlines()[1:]:
        _, cumulative, name = line.split("|")
        rows.append((int(cumulative), name.rstrip()))
    top = sorted(rows, reverse=True)[:count]
    return [f"  {micros / 1e3:8.1f} ms {name}" for micros, name in top]


def bench(rounds: int, imports: bool) -> None:
    cache = tempfile.mkdtemp(prefix="ptc-bench-pyc-")
    try:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        trivial = Path(cache) / "trivial.py"
        trivial.write_text("return 1\n")
        commands = _commands(str(trivial))
        for command in commands.values():  # warm-up: bytecode written, page cache filled
            _once(command, env)
            _once(command, env)
        samples: dict[str, list[float]] = {label: [] for label in commands}
        for _ in range(rounds):
            for label, command in commands.items():
                samples[label].append(_once(command, env))
        floor = statistics.median(samples["python -c pass"])
        stack = statistics.median(samples["stack: anyio.run, orjson"])
        print(f"cold start, {rounds} rounds each, taking turns (medians)")
        print(f"  {'':<26} {'':>11}   {'/ python':>8}  {'- stack':>9}")
        for label, values in samples.items():
            value = statistics.median(values)
            above = f"{(value - stack) * 1e3:+7.1f} ms" if label.startswith("ptc run") else ""
            print(f"  {label:<26} {value * 1e3:8.1f} ms   x{value / floor:6.1f}  {above}")
        if imports:
            print("slowest imports of ptc._commands (cumulative, one run of -X importtime)")
            print("\n".join(_slowest_imports(env, 25)))
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--imports", action="store_true", help="also print the slowest imports")
    args = parser.parse_args()
    bench(args.rounds, args.imports)


if __name__ == "__main__":
    main()
