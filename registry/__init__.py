"""Tools with JSON Schemas, scopes, restrictions and one full policy pipeline.

Every call goes through :meth:`ToolRegistry.execute`: lossless-JSON argument
snapshot, schema validation, pre-execute policy, guards, around-execute
wrappers, the body, output validation, rendering, post-execute policy,
``finalize_content`` and result observers. A tool's failure is returned as a
:class:`ToolFailure`, never raised.

The MCP client's names (``connect_mcp``, ``load_mcp_config``, the server specs,
the ``MCP_*`` codes) load on first use (module ``__getattr__``): a process that
connects no MCP server does not import ``registry._mcp``.
"""

import importlib
from typing import TYPE_CHECKING, Any

from ._define import define_tool as define_tool
from ._exceptions import (
    ABORTED as ABORTED,
)
from ._exceptions import (
    ABORTED_BEFORE_DISPATCH as ABORTED_BEFORE_DISPATCH,
)
from ._exceptions import (
    APPROVAL_CANCELLED as APPROVAL_CANCELLED,
)
from ._exceptions import (
    APPROVAL_REJECTED as APPROVAL_REJECTED,
)
from ._exceptions import (
    APPROVAL_UNAVAILABLE as APPROVAL_UNAVAILABLE,
)
from ._exceptions import (
    INVALID_ARGS as INVALID_ARGS,
)
from ._exceptions import (
    INVALID_TOOL_OUTPUT as INVALID_TOOL_OUTPUT,
)
from ._exceptions import (
    TOOL_DENIED as TOOL_DENIED,
)
from ._exceptions import (
    TOOL_TIMEOUT as TOOL_TIMEOUT,
)
from ._exceptions import (
    UNKNOWN_TOOL as UNKNOWN_TOOL,
)
from ._exceptions import McpCallError as McpCallError
from ._exceptions import McpConfigError as McpConfigError
from ._exceptions import McpConnectionError as McpConnectionError
from ._exceptions import NotJsonError as NotJsonError
from ._exceptions import RegistrationError as RegistrationError
from ._exceptions import RegistryError as RegistryError
from ._exceptions import RestrictionError as RestrictionError
from ._exceptions import ToolArgsError as ToolArgsError
from ._exceptions import ToolError as ToolError
from ._exceptions import ToolOutputError as ToolOutputError
from ._exceptions import UnknownScopeError as UnknownScopeError
from ._json import JsonValue as JsonValue
from ._json import dumps_pretty as dumps_pretty
from ._json import snapshot_json as snapshot_json
from ._pipeline import CheckedCall as CheckedCall
from ._policy import Accept as Accept
from ._policy import Allow as Allow
from ._policy import Ask as Ask
from ._policy import Block as Block
from ._policy import Cancel as Cancel
from ._policy import Deny as Deny
from ._policy import GuardDenial as GuardDenial
from ._policy import PostDecision as PostDecision
from ._policy import PreDecision as PreDecision
from ._policy import ask_before_destructive as ask_before_destructive
from ._registry import ToolRegistry as ToolRegistry
from ._signal import AbortSignal as AbortSignal
from ._timeout import timeout_wrapper as timeout_wrapper
from ._types import ContentBlock as ContentBlock
from ._types import DispatchExecution as DispatchExecution
from ._types import ErrorInfo as ErrorInfo
from ._types import ExecutionMode as ExecutionMode
from ._types import ExecutionToken as ExecutionToken
from ._types import FailureDetail as FailureDetail
from ._types import ProgressFn as ProgressFn
from ._types import ToolAnnotations as ToolAnnotations
from ._types import ToolCall as ToolCall
from ._types import ToolDefinition as ToolDefinition
from ._types import ToolExecution as ToolExecution
from ._types import ToolFailure as ToolFailure
from ._types import ToolOutput as ToolOutput
from ._types import ToolResult as ToolResult
from ._types import ToolReturn as ToolReturn
from ._types import ToolRunContext as ToolRunContext
from ._types import ToolSuccess as ToolSuccess
from ._types import text_block as text_block

if TYPE_CHECKING:
    from ._mcp import MCP_CONNECTION_CLOSED as MCP_CONNECTION_CLOSED
    from ._mcp import MCP_OUTPUT as MCP_OUTPUT
    from ._mcp import MCP_PROTOCOL_ERROR as MCP_PROTOCOL_ERROR
    from ._mcp import MCP_TIMEOUT as MCP_TIMEOUT
    from ._mcp import MCP_TOOL_ERROR as MCP_TOOL_ERROR
    from ._mcp import HttpServer as HttpServer
    from ._mcp import McpConnection as McpConnection
    from ._mcp import McpServers as McpServers
    from ._mcp import ServerSpec as ServerSpec
    from ._mcp import StdioServer as StdioServer
    from ._mcp import connect_mcp as connect_mcp
    from ._mcp import load_mcp_config as load_mcp_config

__all__ = [
    "ABORTED",
    "ABORTED_BEFORE_DISPATCH",
    "APPROVAL_CANCELLED",
    "APPROVAL_REJECTED",
    "APPROVAL_UNAVAILABLE",
    "INVALID_ARGS",
    "INVALID_TOOL_OUTPUT",
    "MCP_CONNECTION_CLOSED",
    "MCP_OUTPUT",
    "MCP_PROTOCOL_ERROR",
    "MCP_TIMEOUT",
    "MCP_TOOL_ERROR",
    "TOOL_DENIED",
    "TOOL_TIMEOUT",
    "UNKNOWN_TOOL",
    "AbortSignal",
    "Accept",
    "Allow",
    "Ask",
    "Block",
    "Cancel",
    "CheckedCall",
    "ContentBlock",
    "Deny",
    "DispatchExecution",
    "ErrorInfo",
    "ExecutionMode",
    "ExecutionToken",
    "FailureDetail",
    "GuardDenial",
    "HttpServer",
    "JsonValue",
    "McpCallError",
    "McpConfigError",
    "McpConnection",
    "McpConnectionError",
    "McpServers",
    "NotJsonError",
    "PostDecision",
    "PreDecision",
    "ProgressFn",
    "RegistrationError",
    "RegistryError",
    "RestrictionError",
    "ServerSpec",
    "StdioServer",
    "ToolAnnotations",
    "ToolArgsError",
    "ToolCall",
    "ToolDefinition",
    "ToolError",
    "ToolExecution",
    "ToolFailure",
    "ToolOutput",
    "ToolOutputError",
    "ToolRegistry",
    "ToolResult",
    "ToolReturn",
    "ToolRunContext",
    "ToolSuccess",
    "UnknownScopeError",
    "ask_before_destructive",
    "connect_mcp",
    "define_tool",
    "dumps_pretty",
    "load_mcp_config",
    "snapshot_json",
    "text_block",
    "timeout_wrapper",
]

#: Public name -> the submodule that defines it, imported on first access.
_LAZY = {
    "MCP_CONNECTION_CLOSED": "._mcp",
    "MCP_OUTPUT": "._mcp",
    "MCP_PROTOCOL_ERROR": "._mcp",
    "MCP_TIMEOUT": "._mcp",
    "MCP_TOOL_ERROR": "._mcp",
    "HttpServer": "._mcp",
    "McpConnection": "._mcp",
    "McpServers": "._mcp",
    "ServerSpec": "._mcp",
    "StdioServer": "._mcp",
    "connect_mcp": "._mcp",
    "load_mcp_config": "._mcp",
}


def __getattr__(name: str) -> Any:
    """Import a public name from its submodule on first access."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later accesses skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
