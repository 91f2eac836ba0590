"""JSON Schema -> the typed Python SDK text a model programs against.

``render_sdk`` turns the visible tool schemas into the ``tools:sdk`` section:
named ``TypedDict`` s for every tool's arguments and output, a ``Tools`` protocol
with one async method per tool (a protocol per namespace, ``tools.git.status``,
for tools named ``git.status``; subscript access for exotic names), the
``ToolCallError`` declaration and :data:`SDK_INSTRUCTIONS`. It never raises on a
schema; whatever it cannot express degrades to ``Any``.

For large tool sets, :class:`ToolCatalog` is discovery mode: ``index_text()`` (also
``render_discovery``) is a compact ``tools:sdk`` section that lists the tools
with one short line each, and ``search``/``describe`` answer the program's
``await tools.search(query)`` and ``await tools.describe(name)``.
"""

from __future__ import annotations

from ._discovery import DISCOVERY_INSTRUCTIONS as DISCOVERY_INSTRUCTIONS
from ._discovery import ToolCatalog as ToolCatalog
from ._discovery import render_discovery as render_discovery
from ._render import SDK_INSTRUCTIONS as SDK_INSTRUCTIONS
from ._render import SdkStats as SdkStats
from ._render import render_sdk as render_sdk
from ._render import sdk_stats as sdk_stats
from ._schema import json_schema_to_py as json_schema_to_py
from ._tools import normalize_tool_schemas as normalize_tool_schemas

__all__ = [
    "DISCOVERY_INSTRUCTIONS",
    "SDK_INSTRUCTIONS",
    "SdkStats",
    "ToolCatalog",
    "json_schema_to_py",
    "normalize_tool_schemas",
    "render_discovery",
    "render_sdk",
    "sdk_stats",
]
