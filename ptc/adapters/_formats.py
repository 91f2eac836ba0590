"""The executor in the shapes of the raw model APIs.

The APIs: OpenAI Chat Completions and Responses, and Anthropic Messages.

    tools = openai_chat_tools(executor)              # or openai_responses_tools, anthropic_tools
    system = system_prompt(executor)                 # the SDK and the code-only rule
    calls = openai_chat_calls(completion)            # the SDK's tool calls -> ModelCalls
    batch = await executor.execute(calls)
    messages += [completion.choices[0].message, *openai_chat_results(batch)]

Nothing here imports ``openai`` or ``anthropic``: the functions read the SDKs' objects by
their fields (the dicts they serialise to work as well) and build plain dicts that are the
SDKs' own request ``TypedDict`` types.

**Strict schemas (OpenAI).** A tool is sent with ``strict: true`` when its parameters can
be put in strict form without changing what they mean (see :func:`strict_json_schema`):
every object closed (``additionalProperties: false``), every property required, and only
keywords strict mode supports. An object that lists its properties but does not say
whether others are allowed is closed (a key the schema does not declare means nothing to
the tool); an optional property becomes required only when ``null`` is valid for it and
is its default (``tag: str | None = None``), since then sending ``null`` means what
leaving it out meant. Anything else — an optional property with another default
(``limit: int = 5``), a free-form or open object, ``oneOf``/``allOf``/``not``, a keyword or
``format`` strict mode lacks, a schema past its size limits — keeps the schema as it is,
with ``strict: false``. ``run_code`` is always strict. Anthropic's tools are sent as
declared (``input_schema``, no ``strict``): its strict tool use depends on the model and
takes a narrower schema subset.

**Results.** Each call's content blocks (MCP spelling) become the API's: text as text,
images (PNG, JPEG, GIF, WebP; base64) as images, everything else as a line of text saying
what it was. Where images go:

* Chat Completions: a ``tool`` message carries text only, so it says
  ``[image 1 (image/png): in the user message after these tool results]`` and one
  ``user`` message after all the tool messages carries each image (``image_url``, a
  ``data:`` URL) after a text part naming its call and number.
* Responses: inside the ``function_call_output``'s ``output`` (``input_image``).
* Anthropic: inside the ``tool_result`` block (an ``image`` block, base64 source), with
  ``is_error`` on a failure.

A batch's ``additional_contexts`` follow the results as user text (a string as is, any
other value as its JSON): in Chat's trailing ``user`` message, a Responses ``message``
item, or text blocks after the ``tool_result`` blocks.

**Calls.** A call's ``arguments`` that are not valid JSON stay text, and the executor
gives that call a ``MALFORMED_CALL`` error result (the rest of the batch runs).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import orjson

from ptc import BatchResult, CodeExecutor, ModelCall
from registry import ContentBlock

if TYPE_CHECKING:
    from anthropic.types import Message, MessageParam, ToolParam, ToolUseBlock
    from openai.types.chat import (
        ChatCompletion,
        ChatCompletionFunctionToolParam,
        ChatCompletionMessage,
        ChatCompletionMessageParam,
        ChatCompletionMessageToolCallUnion,
    )
    from openai.types.responses import (
        FunctionToolParam,
        Response,
        ResponseFunctionToolCall,
        ResponseInputItemParam,
    )

__all__ = [
    "anthropic_calls",
    "anthropic_results",
    "anthropic_tools",
    "api_names",
    "openai_chat_calls",
    "openai_chat_results",
    "openai_chat_tools",
    "openai_responses_calls",
    "openai_responses_results",
    "openai_responses_tools",
    "strict_json_schema",
    "system_prompt",
]

# Both APIs name a function with 1 to 64 of these characters.
_API_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_UNFIT = re.compile(r"[^A-Za-z0-9_-]")
# The image types both APIs take.
_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


# --------------------------------------------------------------------------- model input


def system_prompt(executor: CodeExecutor, scope: str | None = None) -> str:
    """The text the executor's ``sections`` add to the system prompt, for ``scope``.

    ``code`` mode: the code-only rule, then the ``tools:sdk`` section (the Python SDK the
    programs run against, which ``run_code``'s description points to) in a fenced block;
    ``both``: the SDK; ``native``: nothing (``""``).
    """
    sections = executor.describe(scope)["sections"]
    parts = [sections.get("tools:code-only", "")]
    sdk = sections.get("tools:sdk", "")
    if sdk:
        fence = "```"
        while fence in sdk:  # (a tool's description may hold a fenced example)
            fence += "`"
        parts.append(
            "The `tools:sdk` section, the SDK `run_code` programs run against:\n\n"
            f"{fence}python\n{sdk.rstrip()}\n{fence}"
        )
    return "\n\n".join(part for part in parts if part)


def openai_chat_tools(
    executor: CodeExecutor, scope: str | None = None
) -> list[ChatCompletionFunctionToolParam]:
    """The tools for Chat Completions' ``tools=``: ``{"type": "function", "function": ...}``.

    Names the API does not take are renamed (see :func:`api_names`).
    """
    tools: list[ChatCompletionFunctionToolParam] = []
    for tool in _model_tools(executor, scope, "OpenAI"):
        parameters, strict = _openai_parameters(tool["parameters"])
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": tool["name"],
                    "description": tool["description"],
                    "parameters": parameters,
                    "strict": strict,
                },
            }
        )
    return tools


def openai_responses_tools(
    executor: CodeExecutor, scope: str | None = None
) -> list[FunctionToolParam]:
    """The tools for the Responses API's ``tools=``: ``{"type": "function", "name": ...}``.

    ``strict`` is always given, since the API's default is ``true``. Names the API
    does not take are renamed (see :func:`api_names`).
    """
    tools: list[FunctionToolParam] = []
    for tool in _model_tools(executor, scope, "OpenAI"):
        parameters, strict = _openai_parameters(tool["parameters"])
        tools.append(
            {
                "type": "function",
                "name": tool["name"],
                "description": tool["description"],
                "parameters": parameters,
                "strict": strict,
            }
        )
    return tools


def anthropic_tools(executor: CodeExecutor, scope: str | None = None) -> list[ToolParam]:
    """The tools for Anthropic's ``tools=``: ``{"name", "description", "input_schema"}``.

    Names the API does not take are renamed (see :func:`api_names`).
    """
    return [
        {
            "name": tool["name"],
            "description": tool["description"],
            "input_schema": tool["parameters"],
        }
        for tool in _model_tools(executor, scope, "Anthropic")
    ]


def _model_tools(executor: CodeExecutor, scope: str | None, api: str) -> list[dict[str, Any]]:
    """The model-facing tools, each under the name the APIs take (see :func:`api_names`)."""
    tools: list[dict[str, Any]] = executor.describe(scope)["tools"]
    names = api_names(executor, scope)
    return [{**tool, "name": names.get(tool["name"], tool["name"])} for tool in tools]


def api_names(executor: CodeExecutor, scope: str | None = None) -> dict[str, str]:
    """Each tool the model sees -> the name it has in the OpenAI and Anthropic APIs.

    The APIs take 1 to 64 letters, digits, ``_`` or ``-``. A name that fits is kept;
    another (a namespaced ``git.status``, in ``native`` or ``both`` mode) has each other
    character replaced by ``_``, and gets a short hash of its real name when that
    would clash with a name already taken or be too long. Deterministic for a tool
    set; the ``*_calls`` functions map the names back when given the executor.
    """
    listed = sorted(tool["name"] for tool in executor.describe(scope)["tools"])
    names = {name: name for name in listed if _API_NAME.fullmatch(name)}
    taken = set(names)
    for name in listed:
        if name in names:
            continue
        plain = _UNFIT.sub("_", name) or "tool"
        if plain in taken or len(plain) > 64:
            digest = hashlib.sha256(name.encode()).hexdigest()[:8]
            plain = f"{plain[:55]}_{digest}"
        taken.add(plain)
        names[name] = plain
    return names


def _real_names(executor: CodeExecutor | None, scope: str | None) -> dict[str, str]:
    if executor is None:
        return {}
    return {api: real for real, api in api_names(executor, scope).items() if api != real}


def _openai_parameters(parameters: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    strict = strict_json_schema(parameters)
    return (parameters, False) if strict is None else (strict, True)


# --------------------------------------------------------------------------- strict form

# What strict mode takes: structure, annotations and the constraints it supports.
_STRICT_KEYWORDS = frozenset(
    {
        "$defs",
        "$ref",
        "additionalProperties",
        "anyOf",
        "const",
        "default",
        "definitions",
        "description",
        "enum",
        "exclusiveMaximum",
        "exclusiveMinimum",
        "format",
        "items",
        "maxItems",
        "maximum",
        "minItems",
        "minimum",
        "multipleOf",
        "pattern",
        "properties",
        "required",
        "title",
        "type",
    }
)
_STRICT_TYPES = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
_STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_MAX_DEPTH = 10  # levels of nested objects
_MAX_PROPERTIES = 5000
_MAX_ENUM_VALUES = 1000


class _NotStrict(Exception):
    """The schema has no strict form with the same meaning; the message says why."""


def strict_json_schema(schema: Mapping[str, Any]) -> dict[str, Any] | None:
    """``schema`` in OpenAI's strict form, or ``None`` when that would change its meaning.

    The strict form is a new schema: every object gets ``additionalProperties: false``
    and lists all its properties as required, and ``"default": null`` is dropped; the
    input is not changed. See the module docstring for when there is none.
    """
    try:
        return _StrictForm(schema).root()
    except _NotStrict:
        return None


def _strict_problem(schema: Mapping[str, Any]) -> str | None:
    """Why ``schema`` has no strict form (``None``: it has one)."""
    try:
        _StrictForm(schema).root()
    except _NotStrict as exc:
        return str(exc)
    return None


class _StrictForm:
    """One conversion: the root (for ``$ref``) and the running counts of the limits."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema
        self.properties = 0
        self.enum_values = 0

    def root(self) -> dict[str, Any]:
        schema = self.schema
        if not isinstance(schema, Mapping) or schema.get("type") != "object":
            raise _NotStrict("the root is not an object schema")
        if "anyOf" in schema:
            raise _NotStrict("the root is a union")
        return self.convert(schema, "", depth=0, inlining=())

    def convert(
        self, schema: Any, where: str, *, depth: int, inlining: tuple[str, ...]
    ) -> dict[str, Any]:
        if not isinstance(schema, Mapping):
            raise _NotStrict(f"{where or 'the root'} is a boolean schema")
        unknown = sorted(set(schema) - _STRICT_KEYWORDS)
        if unknown:
            raise _NotStrict(f"{where or 'the root'} uses `{unknown[0]}`")
        ref = schema.get("$ref")
        if ref is not None and len(schema) > 1:
            # A $ref with siblings is inlined (strict mode takes a bare $ref only).
            if ref in inlining:
                raise _NotStrict(f"{where} refers to itself with sibling keywords")
            merged = {**self.resolve(ref, where), **schema}
            del merged["$ref"]
            return self.convert(merged, where, depth=depth, inlining=(*inlining, ref))
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key == "default" and value is None:
                continue  # null means what leaving it out means
            out[key] = value
        if ref is not None:
            self.resolve(ref, where)
            return out
        if "type" not in schema and "anyOf" not in schema:
            raise _NotStrict(f"{where or 'the root'} has no type")
        types = schema.get("type", [])
        types = [types] if isinstance(types, str) else types
        if not isinstance(types, list) or not set(types) <= _STRICT_TYPES:
            raise _NotStrict(f"{where} has a type strict mode lacks")
        if "format" in schema and schema["format"] not in _STRICT_FORMATS:
            raise _NotStrict(f"{where} has the format {schema['format']!r}")
        if "enum" in schema:
            enum = schema["enum"]
            self.enum_values += len(enum) if isinstance(enum, list) else 0
            if self.enum_values > _MAX_ENUM_VALUES:
                raise _NotStrict(f"more than {_MAX_ENUM_VALUES} enum values")
        for key in ("$defs", "definitions"):
            if key in schema:
                out[key] = {
                    name: self.convert(sub, f"{key}/{name}", depth=0, inlining=inlining)
                    for name, sub in schema[key].items()
                }
        if "anyOf" in schema:
            out["anyOf"] = [
                self.convert(sub, f"{where}/anyOf/{i}", depth=depth, inlining=inlining)
                for i, sub in enumerate(schema["anyOf"])
            ]
        if "object" in types or "properties" in schema:
            out.update(self.closed_object(schema, where, depth=depth, inlining=inlining))
        if "array" in types or "items" in schema:
            if not isinstance(schema.get("items"), Mapping):
                raise _NotStrict(f"{where} is an array without an items schema")
            out["items"] = self.convert(
                schema["items"], f"{where}/items", depth=depth, inlining=inlining
            )
        return out

    def closed_object(
        self, schema: Mapping[str, Any], where: str, *, depth: int, inlining: tuple[str, ...]
    ) -> dict[str, Any]:
        """``properties``, ``required`` and ``additionalProperties`` of the strict object."""
        if depth >= _MAX_DEPTH:
            raise _NotStrict(f"objects nest deeper than {_MAX_DEPTH} levels")
        extra = schema.get("additionalProperties")
        if "properties" not in schema and extra is not False:
            raise _NotStrict(f"{where or 'the root'} is a free-form object")
        if extra not in (None, False):
            raise _NotStrict(f"{where or 'the root'} allows properties it does not list")
        properties: Mapping[str, Any] = schema.get("properties", {})
        self.properties += len(properties)
        if self.properties > _MAX_PROPERTIES:
            raise _NotStrict(f"more than {_MAX_PROPERTIES} properties")
        required = set(schema.get("required", ()))
        for name, sub in properties.items():
            if name not in required and not (
                isinstance(sub, Mapping)
                and "default" in sub
                and sub["default"] is None
                and self.accepts_null(sub, ())
            ):
                raise _NotStrict(
                    f"{where}/properties/{name} is optional without null as a valid default"
                )
        return {
            "properties": {
                name: self.convert(
                    sub, f"{where}/properties/{name}", depth=depth + 1, inlining=inlining
                )
                for name, sub in properties.items()
            },
            "required": list(properties),
            "additionalProperties": False,
        }

    def accepts_null(self, schema: Any, seen: tuple[str, ...]) -> bool:
        """Whether ``null`` is valid for ``schema`` (as far as its type keywords say)."""
        if not isinstance(schema, Mapping):
            return schema is True
        if "enum" in schema and None not in schema["enum"]:
            return False
        if "const" in schema and schema["const"] is not None:
            return False
        ref = schema.get("$ref")
        if ref is not None and (
            ref in seen or not self.accepts_null(self.resolve(ref, ""), (*seen, ref))
        ):
            return False
        types = schema.get("type")
        if types is not None and "null" not in ([types] if isinstance(types, str) else types):
            return False
        variants = schema.get("anyOf")
        return variants is None or any(self.accepts_null(s, seen) for s in variants)

    def resolve(self, ref: Any, where: str) -> Mapping[str, Any]:
        if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")):
            raise _NotStrict(f"{where} has a $ref outside the schema")
        node: Any = self.schema
        for part in ref[2:].split("/") if ref != "#" else ():
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(node, Mapping) or part not in node:
                raise _NotStrict(f"{where} has a $ref that does not resolve")
            node = node[part]
        if not isinstance(node, Mapping):
            raise _NotStrict(f"{where} has a $ref to a boolean schema")
        return node


# --------------------------------------------------------------------------- calls


def openai_chat_calls(
    message: ChatCompletion
    | ChatCompletionMessage
    | Iterable[ChatCompletionMessageToolCallUnion | Mapping[str, Any]]
    | Mapping[str, Any],
    executor: CodeExecutor | None = None,
    scope: str | None = None,
) -> list[ModelCall]:
    """The tool calls of a Chat Completions answer as ``ModelCall`` objects, in order.

    ``message`` is a ``ChatCompletion`` (its first choice), its ``message``, the
    message's ``tool_calls``, or the dict form of any of them. Arguments are parsed from
    their JSON text (see the module docstring for text that is not JSON).
    """
    if _has(message, "choices"):
        choices = _field(message, "choices") or []
        if not choices:
            return []
        message = _field(choices[0], "message")
    tool_calls = _field(message, "tool_calls") if _is_message(message) else message
    real = _real_names(executor, scope)
    calls: list[ModelCall] = []
    for item in _items(tool_calls, "tool calls"):
        if _field(item, "type") == "custom":
            custom = _field(item, "custom")
            name, arguments = _field(custom, "name"), _field(custom, "input")
        else:
            function = _field(item, "function")
            name, arguments = _field(function, "name"), _field(function, "arguments")
        calls.append(_call(_field(item, "id"), real.get(name, name), arguments))
    return calls


def openai_responses_calls(
    response: Response | Iterable[ResponseFunctionToolCall | Any] | Mapping[str, Any],
    executor: CodeExecutor | None = None,
    scope: str | None = None,
) -> list[ModelCall]:
    """The ``function_call`` items of a Responses answer as ``ModelCall`` objects, in order.

    ``response`` is a ``Response``, its ``output`` items, or the dict form of either;
    items of other kinds (messages, reasoning) are skipped.
    """
    items = _field(response, "output") if _has(response, "output") else response
    real = _real_names(executor, scope)
    return [
        _call(
            _field(item, "call_id"),
            real.get(_field(item, "name"), _field(item, "name")),
            _field(item, "arguments"),
        )
        for item in _items(items, "output items")
        if _field(item, "type") == "function_call"
    ]


def anthropic_calls(
    message: Message | Iterable[ToolUseBlock | Any] | Mapping[str, Any],
    executor: CodeExecutor | None = None,
    scope: str | None = None,
) -> list[ModelCall]:
    """The ``tool_use`` blocks of an Anthropic message as ``ModelCall`` objects, in order.

    ``message`` is a ``Message``, its ``content`` blocks, or the dict form of either;
    blocks of other kinds (text, thinking) are skipped.
    """
    blocks = _field(message, "content") if _has(message, "content") else message
    if isinstance(blocks, str):
        return []  # a message of text only
    real = _real_names(executor, scope)
    return [
        _call(
            _field(block, "id"),
            real.get(_field(block, "name"), _field(block, "name")),
            _field(block, "input"),
        )
        for block in _items(blocks, "content blocks")
        if _field(block, "type") == "tool_use"
    ]


def _call(call_id: Any, name: Any, arguments: Any) -> ModelCall:
    """One call as the executor takes it; what is wrong with it, the executor reports."""
    if isinstance(arguments, str):
        # Text that is not JSON stays text: the executor's MALFORMED_CALL result says why.
        with contextlib.suppress(orjson.JSONDecodeError):
            arguments = orjson.loads(arguments) if arguments else {}
    elif arguments is None:
        arguments = {}
    return ModelCall(call_id=call_id, name=name, arguments=arguments)


def _field(obj: Any, name: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _has(obj: Any, name: str) -> bool:
    return name in obj if isinstance(obj, Mapping) else hasattr(obj, name)


def _is_message(obj: Any) -> bool:
    return _has(obj, "tool_calls") or _has(obj, "role")


def _items(items: Any, what: str) -> Iterable[Any]:
    if items is None:
        return ()
    # (An SDK object is iterable too, over its fields: one call is not a list of them.)
    if isinstance(items, str | bytes | Mapping) or _has(items, "type"):
        raise TypeError(f"expected a message or its {what}, got {type(items).__name__}")
    if not isinstance(items, Iterable):
        raise TypeError(f"expected a message or its {what}, got {type(items).__name__}")
    return items


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class _Image:
    media_type: str
    data: str

    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{self.data}"


def openai_chat_results(batch: BatchResult) -> list[ChatCompletionMessageParam]:
    """The messages that answer a batch in Chat Completions: one ``tool`` message a call.

    Images, and the batch's additional contexts, go in one ``user`` message after the
    tool messages (see the module docstring).
    """
    messages: list[ChatCompletionMessageParam] = []
    trailing: list[dict[str, Any]] = []
    for item in batch.results:
        lines: list[str] = []
        images = 0
        for part in _parts(item.result.content):
            if isinstance(part, str):
                lines.append(part)
                continue
            images += 1
            lines.append(
                f"[image {images} ({part.media_type}): in the user message after these "
                "tool results]"
            )
            trailing.append({"type": "text", "text": f"Tool call {item.call_id}, image {images}:"})
            trailing.append({"type": "image_url", "image_url": {"url": part.data_url()}})
        messages.append({"role": "tool", "tool_call_id": item.call_id, "content": "\n".join(lines)})
    trailing.extend({"type": "text", "text": text} for text in _contexts(batch))
    if trailing:
        messages.append(cast("ChatCompletionMessageParam", {"role": "user", "content": trailing}))
    return messages


def openai_responses_results(batch: BatchResult) -> list[ResponseInputItemParam]:
    """The input items that answer a batch in Responses: one ``function_call_output`` a call.

    A call's output is its text, or a list of ``input_text`` and ``input_image`` parts
    when it has images; the batch's additional contexts follow as a user ``message``.
    """
    items: list[ResponseInputItemParam] = []
    for item in batch.results:
        parts = _parts(item.result.content)
        output: str | list[dict[str, Any]]
        if all(isinstance(part, str) for part in parts):
            output = "\n".join(cast("list[str]", parts))
        else:
            output = [
                {"type": "input_text", "text": part}
                if isinstance(part, str)
                else {"type": "input_image", "image_url": part.data_url()}
                for part in parts
            ]
        items.append(
            cast(
                "ResponseInputItemParam",
                {"type": "function_call_output", "call_id": item.call_id, "output": output},
            )
        )
    contexts = _contexts(batch)
    if contexts:
        content = [{"type": "input_text", "text": text} for text in contexts]
        items.append(
            cast("ResponseInputItemParam", {"type": "message", "role": "user", "content": content})
        )
    return items


def anthropic_results(batch: BatchResult) -> MessageParam:
    """The one ``user`` message that answers a batch: a ``tool_result`` block a call.

    Each block holds the call's text and image blocks, with ``is_error`` on a failure;
    the batch's additional contexts follow as text blocks.
    """
    content: list[dict[str, Any]] = []
    for item in batch.results:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": item.call_id}
        inner = [
            {"type": "text", "text": part}
            if isinstance(part, str)
            else {
                "type": "image",
                "source": {"type": "base64", "media_type": part.media_type, "data": part.data},
            }
            for part in _parts(item.result.content)
        ]
        if inner:  # the API takes no empty text block
            block["content"] = inner
        if item.result.is_error:
            block["is_error"] = True
        content.append(block)
    content.extend({"type": "text", "text": text} for text in _contexts(batch))
    return cast("MessageParam", {"role": "user", "content": content})


def _parts(blocks: Sequence[ContentBlock]) -> list[str | _Image]:
    """Content blocks as text and images the APIs take (anything else described in text)."""
    parts: list[str | _Image] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            if block.get("text"):
                parts.append(str(block["text"]))
        elif kind == "image":
            parts.append(_image(block.get("mimeType"), block.get("data"), "an image"))
        elif kind == "resource":
            resource = block.get("resource") or {}
            uri = resource.get("uri", "")
            if isinstance(resource.get("text"), str):
                parts.append(f"[resource {uri}]\n{resource['text']}")
            elif str(resource.get("mimeType", "")).startswith("image/"):
                parts.append(_image(resource.get("mimeType"), resource.get("blob"), f"image {uri}"))
            else:
                parts.append(f"[resource {uri} ({resource.get('mimeType', 'binary')}): not shown]")
        elif kind == "resource_link":
            parts.append(f"[resource link: {block.get('name', '')} {block.get('uri', '')}]")
        elif kind == "audio":
            parts.append(f"[audio ({block.get('mimeType')}): not shown, tool results take none]")
        else:
            parts.append(f"[{kind} content: not shown]")
    return parts


def _image(media_type: Any, data: Any, what: str) -> str | _Image:
    kind = str(media_type).lower().replace("image/jpg", "image/jpeg")
    if kind in _IMAGE_TYPES and isinstance(data, str):
        return _Image(kind, data)
    return f"[{what} ({media_type}): not shown, the API takes PNG, JPEG, GIF and WebP]"


def _contexts(batch: BatchResult) -> list[str]:
    return [
        context if isinstance(context, str) else orjson.dumps(context).decode()
        for context in batch.additional_contexts
    ]
