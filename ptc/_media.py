"""Images and audio a program returns: shown to the model as content, after the run's text.

A tool may return MCP image or audio blocks (``{"type": "image", "data":
<base64>, "mimeType": "image/png"}``; an MCP tool without an output schema
returns its list of content blocks as its value). A program passes one on to
the model by returning it: the rule looks at the returned value only — the
value itself, or each item of a returned list — never at nested values or at
printed text. There, a dict whose ``type`` is ``image`` or ``audio`` and which
has a ``data`` key is a media block. Each one is checked on the host:

- ``mimeType`` is one of :data:`MIME_SIGNATURES` (PNG, JPEG, GIF, WebP; WAV,
  MP3, OGG, FLAC, WebM audio) and matches the block's ``type``;
- ``data`` is strict base64 (no whitespace, correct padding), at most
  :data:`MAX_MEDIA_DATA_CHARS` characters, and decodes to bytes that start
  with that format's signature (a block cannot claim to be a PNG and be
  something else);
- at most :data:`MAX_MEDIA_BLOCKS` per result.

A block that passes becomes a content block of exactly ``type``, ``data``
and ``mimeType`` (nothing else of the program's dict is carried over), after
the text block; in the text it stands as ``<image 1: image/png, 48,213
bytes>``. A block that fails is not shown: in the text it stands as
``<image 1 refused: why>``. The value (``{logs, result}``) keeps the result as
the program returned it. The output budget counts each shown block as
:data:`MEDIA_BUDGET_CHARS` characters (see ``ptc._budget``).
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass
from typing import Any, Final

from registry import ContentBlock

__all__ = [
    "MAX_MEDIA_BLOCKS",
    "MAX_MEDIA_DATA_CHARS",
    "MEDIA_BUDGET_CHARS",
    "MEDIA_TYPES",
    "MIME_SIGNATURES",
    "Media",
    "find_media",
    "is_media_block",
    "with_placeholders",
]

#: The content block types the rule shows.
MEDIA_TYPES: Final = ("image", "audio")
#: What one shown block costs of the output budget, in characters: about what
#: a model charges for a one-megapixel image (roughly 1,500 tokens), whatever
#: its size in base64.
MEDIA_BUDGET_CHARS: Final = 6_000
#: The longest ``data`` a shown block may have: 5 MiB of base64 (3.75 MiB of
#: bytes), within what the model APIs take for one image.
MAX_MEDIA_DATA_CHARS: Final = 5 * 1024 * 1024
#: The most media blocks one result may show.
MAX_MEDIA_BLOCKS: Final = 20

_RIFF: Final = b"RIFF"
#: The MIME types shown, with the signatures their bytes may start with: a
#: prefix, or (RIFF containers) ``RIFF``, a size, then the form type. No SVG:
#: it is a document that can hold scripts, not an image.
MIME_SIGNATURES: Final[dict[str, tuple[bytes, ...]]] = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (_RIFF + b"WEBP",),
    "audio/wav": (_RIFF + b"WAVE",),
    "audio/mpeg": (b"ID3", b"\xff\xfb", b"\xff\xf3", b"\xff\xf2"),
    "audio/ogg": (b"OggS",),
    "audio/flac": (b"fLaC",),
    "audio/webm": (b"\x1a\x45\xdf\xa3",),
}
_ALIASES: Final = {"image/jpg": "image/jpeg", "audio/x-wav": "audio/wav", "audio/mp3": "audio/mpeg"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Media:
    """One media block found in a result, shown (``block``) or refused (``problem``).

    Attributes:
        number: its place among the result's media blocks, from 1.
        index: its index in the returned list (``None``: the result itself).
        kind: ``"image"`` or ``"audio"``.
        block: the content block to show, or ``None`` when refused.
        problem: why it was refused, or ``None`` when shown.
        size: its decoded size in bytes (when shown).
    """

    number: int
    index: int | None
    kind: str
    block: ContentBlock | None = None
    problem: str | None = None
    size: int = 0

    @property
    def placeholder(self) -> str:
        """What stands for it in the run's text."""
        if self.block is None:
            return f"<{self.kind} {self.number} refused: {self.problem}>"
        return f"<{self.kind} {self.number}: {self.block['mimeType']}, {self.size:,} bytes>"


def is_media_block(value: object) -> bool:
    """Whether ``value`` is shaped like a media block (see the module)."""
    return type(value) is dict and value.get("type") in MEDIA_TYPES and "data" in value


def find_media(result: Any) -> list[Media]:
    """The media blocks of a program's ``result``, each checked (see the module)."""
    if is_media_block(result):
        found: list[tuple[int | None, dict[str, Any]]] = [(None, result)]
    elif type(result) is list:
        found = [(i, item) for i, item in enumerate(result) if is_media_block(item)]
    else:
        return []
    media = []
    for number, (index, item) in enumerate(found, start=1):
        kind = item["type"]
        if number > MAX_MEDIA_BLOCKS:
            problem: str | None = f"a result shows at most {MAX_MEDIA_BLOCKS} images or audio clips"
            block, size = None, 0
        else:
            block, size, problem = _checked(kind, item)
        media.append(
            Media(number=number, index=index, kind=kind, block=block, problem=problem, size=size)
        )
    return media


def with_placeholders(result: Any, media: list[Media], *, refused: bool = True) -> Any:
    """``result`` with each of ``media`` replaced by its placeholder.

    ``refused=False`` keeps the refused blocks as they are.
    """
    chosen = {m.index: m.placeholder for m in media if refused or m.block is not None}
    if None in chosen:
        return chosen[None]
    if not chosen:
        return result
    return [chosen.get(i, item) for i, item in enumerate(result)]


def _checked(kind: str, item: dict[str, Any]) -> tuple[ContentBlock | None, int, str | None]:
    """The content block ``item`` stands for and its size, or why it is refused."""
    mime = item.get("mimeType")
    if not isinstance(mime, str):
        return None, 0, "it has no mimeType string"
    mime = _ALIASES.get(mime.lower(), mime.lower())
    known = [m for m in MIME_SIGNATURES if m.startswith(kind + "/")]
    if mime not in known:
        shown = repr(item["mimeType"])
        if len(shown) > 40:  # the program's text, in the model's: kept short
            shown = shown[:39] + "…"
        return None, 0, f"its mimeType {shown} is not one of {', '.join(known)}"
    data = item["data"]
    if not isinstance(data, str):
        return None, 0, "its data is not a base64 string"
    if len(data) > MAX_MEDIA_DATA_CHARS:
        return (
            None,
            0,
            f"its data is {len(data):,} characters of base64, over the limit of "
            f"{MAX_MEDIA_DATA_CHARS:,}",
        )
    try:
        raw = binascii.a2b_base64(data, strict_mode=True)
    except (binascii.Error, ValueError):
        return None, 0, "its data is not valid base64"
    if not raw:
        return None, 0, "its data is empty"
    if not any(_starts_with(raw, signature) for signature in MIME_SIGNATURES[mime]):
        return None, 0, f"its data is not {mime} (the bytes do not start like one)"
    return {"type": kind, "data": data, "mimeType": mime}, len(raw), None


def _starts_with(raw: bytes, signature: bytes) -> bool:
    if signature.startswith(_RIFF) and len(signature) == 8:
        return raw.startswith(_RIFF) and raw[8:12] == signature[4:]
    return raw.startswith(signature)
