"""``ptc run`` on inputs it cannot run says so in one line and exits 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from ptc._cli import app

ROOT = Path(__file__).resolve().parents[2]
TOOLS = f"{ROOT / 'examples' / 'tools.py'}:registry"
SCHEMAS = ROOT / "tests" / "data" / "github-mcp-server.json"


def _run(*args: str, stdin: bytes | None = None) -> tuple[int, list[str]]:
    out = CliRunner().invoke(app, ["run", *args], input=stdin)
    assert out.exception is None or isinstance(out.exception, SystemExit), out.exception
    return out.exit_code, out.output.strip().splitlines()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            b"\x7fELF\x02\x01\x01\x00\x00",
            "is a binary file (it holds NUL bytes), not a Python program",
        ),
        (
            b"print('caf\xe9')\n",
            "is not UTF-8 text (byte 0xe9 at offset 10); save the program as UTF-8",
        ),
        (
            b"\xef\xbb\xbfprint(1)\n#\xff",
            "is not UTF-8 text (byte 0xff at offset 13); save the program as UTF-8",
        ),
    ],
)
def test_a_program_that_is_not_utf8_text_is_one_clear_line(
    tmp_path: Path, data: bytes, message: str
) -> None:
    program = tmp_path / "program.py"
    program.write_bytes(data)
    code, lines = _run(str(program), "--tools", TOOLS)
    assert (code, lines) == (2, [f"ptc: error: {program} {message}"])
    code, lines = _run("-", "--tools", TOOLS, stdin=data)
    assert (code, lines) == (2, [f"ptc: error: standard input {message}"])


def test_a_schema_file_is_not_a_registry_run_can_call() -> None:
    code, lines = _run(
        str(ROOT / "examples" / "programs" / "fanout_search.py"), "--tools", str(SCHEMAS)
    )
    assert code == 2
    assert lines == [
        "ptc: error: `ptc run` needs a registry whose tools it can call (path/to/file.py:attr "
        f"or package.module:attr); {SCHEMAS} is a file of tool schemas, which only `ptc sdk` reads"
    ]


def test_tools_says_a_schema_file_is_not_a_registry() -> None:
    out = CliRunner().invoke(app, ["tools", "--tools", str(SCHEMAS)])
    assert out.exit_code == 2
    assert out.output.strip().splitlines() == [
        f"ptc: error: {SCHEMAS} is a file of tool schemas, not a registry: name one as "
        "path/to/file.py:attr or package.module:attr"
    ]
