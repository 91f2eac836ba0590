"""Images and audio a program returns reach the model as content (``ptc._media``).

The rule: an image or audio block returned by the program (the result itself,
or an item of the returned list) follows the run's text as a content block,
checked on the host; in the text it is a placeholder; the value keeps the
result as returned; each shown block counts ``MEDIA_BUDGET_CHARS`` of the
output budget.
"""

from __future__ import annotations

import base64
import math
import os
import struct
import zlib
from collections.abc import AsyncIterator
from typing import Any

import mcp_types as types
import orjson
import pytest
from mcp import Client

import ptc._media
from ptc import CodeExecutor
from ptc._budget import apply_output_budget, over_budget
from ptc._media import MAX_MEDIA_BLOCKS, MEDIA_BUDGET_CHARS, find_media
from ptc._serve import CodeModeServer
from registry import (
    MCP_OUTPUT,
    ToolDefinition,
    ToolOutput,
    ToolRegistry,
    ToolReturn,
    ToolRunContext,
    ToolSuccess,
    text_block,
)
from runtime import Runtime, SubprocessRuntime, get_runtime
from runtime.testing import InProcessRuntime

pytestmark = pytest.mark.anyio


def png(width: int = 2, height: int = 2) -> bytes:
    """A real PNG: red pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


PNG = base64.b64encode(png()).decode()
PNG_SIZE = len(png())
JPEG = base64.b64encode(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x00" * 20).decode()
WAV = base64.b64encode(b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00" * 24).decode()


def image(data: str = PNG, mime: str = "image/png", **extra: Any) -> dict[str, Any]:
    return {"type": "image", "data": data, "mimeType": mime, **extra}


def screenshot_tools() -> ToolRegistry:
    """``screenshot``: what an MCP tool without an output schema returns (its blocks)."""
    reg = ToolRegistry()

    async def screenshot(args: dict[str, Any], ctx: ToolRunContext) -> ToolReturn:
        blocks = [{"type": "text", "text": "a red square"}, image()]
        return ToolReturn(blocks, blocks)

    reg.register(
        ToolDefinition(
            name="screenshot",
            description="Take a screenshot.",
            parameters={"type": "object", "properties": {}},
            output=ToolOutput(schema=dict(MCP_OUTPUT)),
            execute=screenshot,
            concurrency_safe=True,
        )
    )
    return reg


def _pyodide_missing() -> str | None:
    """Why the Pyodide worker cannot run here, or None. CI must have it: never skip there."""
    from runtime._pyodide._assets import PyodideNotInstalledError, locate_pyodide

    try:
        locate_pyodide()
    except PyodideNotInstalledError as exc:
        if os.environ.get("CI"):
            raise
        return str(exc)
    return None


_PYODIDE_MISSING = _pyodide_missing()


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(
    scope="module",
    params=[
        pytest.param("subprocess"),
        pytest.param(
            "pyodide",
            marks=[pytest.mark.pyodide]
            + ([pytest.mark.skip(reason=_PYODIDE_MISSING)] if _PYODIDE_MISSING else []),
        ),
    ],
)
async def real_worker(request: pytest.FixtureRequest) -> AsyncIterator[CodeExecutor]:
    """Both real workers: the rule is the host's, so each needs nothing of its own."""
    runtime: Runtime = (
        SubprocessRuntime() if request.param == "subprocess" else get_runtime("pyodide")
    )
    async with runtime, CodeExecutor(screenshot_tools(), runtime=runtime) as ex:
        yield ex


async def run(code: str, **options: Any) -> Any:
    async with CodeExecutor(screenshot_tools(), runtime=InProcessRuntime(), **options) as ex:
        return await ex.run_code(code)


# --------------------------------------------------------------------------- the rule


async def test_an_image_a_tool_gave_the_program_reaches_the_model_through_the_real_worker(
    real_worker: CodeExecutor,
) -> None:
    r = await real_worker.run_code(
        "blocks = await tools.screenshot({})\nprint(blocks[0]['text'])\nreturn blocks[1]"
    )
    assert not r.is_error
    assert r.content == [
        text_block(f"a red square\n<image 1: image/png, {PNG_SIZE:,} bytes>"),
        {"type": "image", "data": PNG, "mimeType": "image/png"},
    ]
    # The value keeps the result as the program returned it.
    assert r.value == {"logs": ["a red square"], "result": image()}


async def test_a_returned_list_shows_each_of_its_images_after_the_text(
    real_worker: CodeExecutor,
) -> None:
    r = await real_worker.run_code(
        "blocks = await tools.screenshot({})\nreturn [blocks[1], {'n': 1}, blocks[1]]"
    )
    assert not r.is_error
    text, *media = r.content
    assert orjson.loads(text["text"]) == [
        f"<image 1: image/png, {PNG_SIZE:,} bytes>",
        {"n": 1},
        f"<image 2: image/png, {PNG_SIZE:,} bytes>",
    ]
    assert media == [image(), image()]
    assert "iVBOR" not in text["text"]  # never its base64 as text


async def test_the_tools_whole_value_passes_its_image_on(real_worker: CodeExecutor) -> None:
    r = await real_worker.run_code("return await tools.screenshot({})")
    assert [block["type"] for block in r.content] == ["text", "image"]
    assert '"a red square"' in r.content[0]["text"]


async def test_audio_is_shown_too_and_aliases_are_normalised() -> None:
    r = await run(
        f"return [{{'type': 'audio', 'data': {WAV!r}, 'mimeType': 'audio/x-wav'}}, "
        f"{{'type': 'image', 'data': {JPEG!r}, 'mimeType': 'IMAGE/JPG'}}]"
    )
    assert r.content[1:] == [
        {"type": "audio", "data": WAV, "mimeType": "audio/wav"},
        {"type": "image", "data": JPEG, "mimeType": "image/jpeg"},
    ]


async def test_only_the_three_fields_of_a_block_are_carried_over() -> None:
    r = await run(
        f"return {{'type': 'image', 'data': {PNG!r}, 'mimeType': 'image/png', "
        "'annotations': {'audience': ['user']}, 'uri': 'file:///etc/passwd', 'text': 'hi'}"
    )
    assert r.content[1] == image()


@pytest.mark.parametrize(
    "code",
    [
        "print(await tools.screenshot({}))",  # printed: text, not an image
        "return {'shot': (await tools.screenshot({}))[1]}",  # nested in a dict
        "return [[(await tools.screenshot({}))[1]]]",  # nested in a list
        "await tools.screenshot({})\nreturn 'done'",  # intermediate: stays in the program
    ],
)
async def test_an_image_that_is_not_returned_at_the_top_is_not_shown(code: str) -> None:
    r = await run(code)
    assert not r.is_error
    assert [block["type"] for block in r.content] == ["text"]


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("block", "why"),
    [
        (image(data="not base64!"), "its data is not valid base64"),
        (image(data=PNG[:40] + "\n" + PNG[40:]), "its data is not valid base64"),
        (image(data=PNG[:-1]), "its data is not valid base64"),
        (image(data=""), "its data is empty"),
        (image(data=JPEG), "its data is not image/png (the bytes do not start like one)"),
        (
            image(data=base64.b64encode(b"<script>alert(1)</script>").decode()),
            "its data is not image/png (the bytes do not start like one)",
        ),
        (
            image(mime="image/svg+xml"),
            "its mimeType 'image/svg+xml' is not one of image/png, image/jpeg, image/gif, "
            "image/webp",
        ),
        (
            {"type": "audio", "data": PNG, "mimeType": "image/png"},
            "its mimeType 'image/png' is not one of audio/wav, audio/mpeg, audio/ogg, "
            "audio/flac, audio/webm",
        ),
        ({"type": "image", "data": PNG}, "it has no mimeType string"),
        (image(data=12), "its data is not a base64 string"),
        (image(mime="x" * 500), "its mimeType '" + "x" * 38 + "… is not one of"),
    ],
)
async def test_a_forged_or_invalid_image_is_refused_with_a_clear_message(
    block: dict[str, Any], why: str
) -> None:
    r = await run(f"return [{block!r}, 'after']")
    assert not r.is_error
    text = r.content[0]["text"]
    assert len(r.content) == 1  # nothing but the text
    assert f"<{block['type']} 1 refused: {why}" in text
    assert '"after"' in text
    assert r.value["result"] == [block, "after"]  # the value is what was returned


async def test_an_oversized_image_is_refused_before_it_is_decoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ptc._media, "MAX_MEDIA_DATA_CHARS", len(PNG) - 4)
    r = await run(f"return {image()!r}")
    limit = f"{len(PNG) - 4:,}"
    assert r.content == [
        text_block(
            f"<image 1 refused: its data is {len(PNG):,} characters of base64, "
            f"over the limit of {limit}>"
        )
    ]


def test_the_size_limit_is_five_mebibytes_of_base64() -> None:
    big = "A" * (5 * 1024 * 1024 + 4)
    (media,) = find_media(image(data=big))
    assert media.block is None
    assert media.problem is not None and "over the limit of 5,242,880" in media.problem


async def test_at_most_so_many_blocks_are_shown_and_the_rest_refused() -> None:
    r = await run(f"return [{image()!r}] * {MAX_MEDIA_BLOCKS + 2}", output_budget=math.inf)
    assert len(r.content) == 1 + MAX_MEDIA_BLOCKS
    refused = f"a result shows at most {MAX_MEDIA_BLOCKS} images or audio clips"
    assert f"<image {MAX_MEDIA_BLOCKS + 1} refused: {refused}>" in r.content[0]["text"]
    assert f"<image {MAX_MEDIA_BLOCKS + 2} refused: {refused}>" in r.content[0]["text"]


# --------------------------------------------------------------------------- the budget


async def test_an_image_counts_its_fixed_share_not_its_base64_length() -> None:
    big = base64.b64encode(png(300, 300) + b"\x00" * 60_000).decode()
    assert len(big) > 80_000
    r = await run(f"print('one image')\nreturn {image(data=big)!r}", output_budget=10_000)
    assert [block["type"] for block in r.content] == ["text", "image"]
    assert r.content[1]["data"] == big
    assert r.meta is None or "truncated" not in r.meta
    assert r.value["result"]["data"] == big  # the value is not cut either


async def test_images_over_the_budget_are_dropped_last_first_and_a_line_says_so() -> None:
    r = await run(f"return [{image()!r}] * 5", output_budget=30_000)
    text, *media = r.content
    assert len(media) == 4
    assert text["text"].endswith(
        "[… 1 of 5 images not shown (number 5): each counts 6,000 characters of the output "
        "budget (30,000). Return fewer.]"
    )
    assert len(text["text"]) + MEDIA_BUDGET_CHARS * len(media) <= 30_000
    assert r.meta is not None
    truncation = r.meta["truncated"]
    assert truncation["media_dropped"] == 1
    assert truncation["cut"] == MEDIA_BUDGET_CHARS
    assert truncation["chars"] == len(text["text"].split("\n[…")[0]) + 5 * MEDIA_BUDGET_CHARS


async def test_a_long_text_gets_half_the_budget_and_the_image_the_rest() -> None:
    r = await run(f"print('x' * 50_000)\nreturn {image()!r}", output_budget=20_000)
    text, shown = r.content
    assert shown == image()
    assert "characters cut (budget 20,000)" in text["text"]
    assert len(text["text"]) <= 20_000 - MEDIA_BUDGET_CHARS
    assert len(text["text"]) > 20_000 - MEDIA_BUDGET_CHARS - 200


@pytest.mark.parametrize("budget", [2_000, 6_500, 9_000, 13_000, 25_000, 61_000])
@pytest.mark.parametrize("images", [1, 3, 12])
@pytest.mark.parametrize("text_chars", [0, 100, 40_000])
def test_text_plus_the_images_shown_never_exceed_the_budget(
    budget: int, images: int, text_chars: int
) -> None:
    content = [text_block("y" * text_chars), *[image()] * images]
    result = ToolSuccess(value={"logs": []}, content=content)
    total = text_chars + images * MEDIA_BUDGET_CHARS
    assert over_budget(result, budget) is (total > budget)
    cut, truncation = apply_output_budget(result, budget)
    text = cut.content[0]["text"]
    shown = [block for block in cut.content if block["type"] == "image"]
    assert len(text) + len(shown) * MEDIA_BUDGET_CHARS <= budget
    if total <= budget:
        assert cut.content == content and truncation is None
    else:
        assert truncation is not None
        assert truncation.media_dropped == images - len(shown)
        # The text keeps its length or half the budget, whichever is less (a few
        # characters go to the line that says what was dropped).
        assert len(text) >= min(text_chars, budget // 2) - (150 if shown != content[1:] else 0)


async def test_a_value_over_its_budget_cuts_the_result_to_its_text_without_the_base64() -> None:
    r = await run(f"print('z' * 20_000)\nreturn [{image()!r}] * 3", output_budget=20_000)
    value = r.value
    assert value["truncated"]["result"] == "json"
    assert isinstance(value["result"], str)
    assert "<image 1: image/png" in value["result"]
    assert PNG not in value["result"]
    assert value["truncated"]["cut"] >= 3 * MEDIA_BUDGET_CHARS


async def test_without_a_budget_every_image_is_shown() -> None:
    r = await run(f"return [{image()!r}] * 8", output_budget=math.inf)
    assert len(r.content) == 9


# --------------------------------------------------------------------------- where it shows


async def test_the_sdk_text_says_how_to_pass_an_image_on() -> None:
    async with CodeExecutor(screenshot_tools(), runtime=InProcessRuntime()) as ex:
        sdk = ex.sdk_text()
    assert (
        "To see an image or audio block a tool returned "
        '(`{"type": "image", "data": <base64>, "mimeType": ...}`), `return` it, alone or as an '
        "item of the returned list: it comes back to you as the image itself, not as text."
    ) in sdk


async def test_an_mcp_client_of_ptc_serve_gets_the_image_as_image_content() -> None:
    async with CodeExecutor(screenshot_tools(), runtime=InProcessRuntime()) as executor:
        server = CodeModeServer(executor)
        server.bind()
        async with Client(server.server, mode="legacy") as client:
            result = await client.call_tool(
                "run_code",
                {"code": "return (await tools.screenshot({}))[1]", "description": "a shot"},
            )
    assert not result.is_error
    text, shown = result.content
    assert isinstance(text, types.TextContent) and text.text.startswith("<image 1: image/png")
    assert isinstance(shown, types.ImageContent)
    assert shown.data == PNG and shown.mime_type == "image/png"
