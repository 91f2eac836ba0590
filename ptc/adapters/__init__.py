"""Adapters: code mode inside the agent frameworks and model APIs people already use.

Each framework is an optional extra, imported only when one of its names is first
used: ``import ptc.adapters`` imports none of them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Tools written for other frameworks: each function imports its framework when called.
from ._foreign_tools import MODEL_RETRY as MODEL_RETRY
from ._foreign_tools import TOOL_EXCEPTION as TOOL_EXCEPTION
from ._foreign_tools import TOOL_FAILED as TOOL_FAILED
from ._foreign_tools import TOOL_NEEDS_FRAMEWORK as TOOL_NEEDS_FRAMEWORK
from ._foreign_tools import register_fastmcp_tools as register_fastmcp_tools
from ._foreign_tools import register_langchain_tools as register_langchain_tools
from ._foreign_tools import register_pydantic_ai_tools as register_pydantic_ai_tools

# The API formats import no SDK (they read the SDKs' objects by their fields).
from ._formats import anthropic_calls as anthropic_calls
from ._formats import anthropic_results as anthropic_results
from ._formats import anthropic_tools as anthropic_tools
from ._formats import api_names as api_names
from ._formats import openai_chat_calls as openai_chat_calls
from ._formats import openai_chat_results as openai_chat_results
from ._formats import openai_chat_tools as openai_chat_tools
from ._formats import openai_responses_calls as openai_responses_calls
from ._formats import openai_responses_results as openai_responses_results
from ._formats import openai_responses_tools as openai_responses_tools
from ._formats import strict_json_schema as strict_json_schema
from ._formats import system_prompt as system_prompt

if TYPE_CHECKING:
    from ._langchain import code_mode_langchain_tool as code_mode_langchain_tool
    from ._openai_agents import code_mode_tool as code_mode_tool
    from ._pydantic_ai import CodeModeToolset as CodeModeToolset
    from ._pydantic_ai import code_mode_toolset as code_mode_toolset

# name -> the private module that defines it (imported on first use)
_LAZY = {
    "CodeModeToolset": "._pydantic_ai",
    "code_mode_toolset": "._pydantic_ai",
    "code_mode_tool": "._openai_agents",
    "code_mode_langchain_tool": "._langchain",
}

__all__ = [
    "MODEL_RETRY",
    "TOOL_EXCEPTION",
    "TOOL_FAILED",
    "TOOL_NEEDS_FRAMEWORK",
    "CodeModeToolset",
    "anthropic_calls",
    "anthropic_results",
    "anthropic_tools",
    "api_names",
    "code_mode_langchain_tool",
    "code_mode_tool",
    "code_mode_toolset",
    "openai_chat_calls",
    "openai_chat_results",
    "openai_chat_tools",
    "openai_responses_calls",
    "openai_responses_results",
    "openai_responses_tools",
    "register_fastmcp_tools",
    "register_langchain_tools",
    "register_pydantic_ai_tools",
    "strict_json_schema",
    "system_prompt",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
