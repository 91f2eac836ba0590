"""LangChain: code mode as one ``StructuredTool`` (``invoke`` and ``ainvoke``).

    executor = CodeExecutor(registry)
    agent = create_agent(model, tools=[code_mode_langchain_tool(executor)])

The tool is ``run_code``: its JSON Schema is the tool's ``args_schema`` (a dict, so
``convert_to_openai_tool`` and every chat model's ``bind_tools`` send it unchanged), and
its description holds the short ``run_code`` description, the code-only rule and the SDK
of the scope's tools, so the model needs nothing else. The description is built from the
registry as it is when the tool is made: make the tool again after the tool set changed.
(Some OpenAI deployments cap a function description at 1,024 characters; with
``sdk_in_description=False`` the description is the short one, and
``system_prompt(executor, scope)`` goes into the agent's system prompt instead.)

Each call runs through :meth:`ptc.CodeExecutor.execute` with the model's tool call id
(when LangChain has one: the tool was invoked with a ``ToolCall``), so events, sub-call
ids and policy see it like any other model call; the registry validates the arguments.

What the model gets back:

* a successful run: its text (what the program printed, then its result), or a list of
  LangChain content blocks (text, and ``image`` blocks for the images a program passed
  back); the response format is ``content_and_artifact``, and the artifact is the run's
  ``{logs, result}`` value, for the application (a ``ToolMessage``'s ``artifact``);
* any failure (a failed run, malformed arguments, a denial, a limit, a busy executor):
  its ``Error: ...`` text, raised as ``ToolException`` and handled by the tool
  (``handle_tool_error``), so the agent gets a ``ToolMessage`` with ``status="error"``
  and goes on. Only misuse (an unknown scope) and infrastructure failures raise.

Contexts a run defers (``ctx.defer_context``) follow the output as text.

Sync and async: ``ainvoke`` runs the program in the caller's event loop. ``invoke``
needs an event loop to run it in, and an executor belongs to one loop (its runtime's
workers do):

* made inside a running event loop (e.g. in ``async with CodeExecutor(...)``), the tool
  runs sync calls from other threads (a sync agent in a worker thread) in *that* loop;
* made in plain sync code, it runs them in a background event loop of the adapters' own
  (one daemon thread, started by the first such call); the executors it ran are closed
  there when the interpreter exits;
* ``invoke`` from inside a running event loop raises: it would block the loop the run
  may need; ``await tool.ainvoke(...)`` there.
"""

from __future__ import annotations

import atexit
import contextvars
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel

try:
    from langchain_core.tools import StructuredTool, ToolException
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "ptc.adapters.code_mode_langchain_tool needs LangChain: pip install 'ptc-runner[langchain]'"
    ) from exc

from ptc import CODE_ONLY_RULE, RUN_CODE, BatchResult, CodeExecutor, ExecutorConfigError, ModelCall
from ptc._calls import new_call_id
from registry import ToolSuccess

from ._formats import _contexts, _parts

__all__ = ["code_mode_langchain_tool"]

T = TypeVar("T")

logger = logging.getLogger("ptc.adapters")

#: LangChain content: a string, or a list of its content blocks.
Content = str | list[str | dict[str, Any]]

# The tool call id LangChain gives ``run``/``arun`` when invoked with a ToolCall (its
# function only gets the arguments; see _CodeModeTool).
_TOOL_CALL_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "ptc_langchain_tool_call_id", default=None
)


class _CodeModeTool(StructuredTool):
    """A ``StructuredTool`` that hands the model's tool call id to its function."""

    def run(self, tool_input: Any, *args: Any, **kwargs: Any) -> Any:
        token = _TOOL_CALL_ID.set(kwargs.get("tool_call_id"))
        try:
            return super().run(tool_input, *args, **kwargs)
        finally:
            _TOOL_CALL_ID.reset(token)

    async def arun(self, tool_input: Any, *args: Any, **kwargs: Any) -> Any:
        token = _TOOL_CALL_ID.set(kwargs.get("tool_call_id"))
        try:
            return await super().arun(tool_input, *args, **kwargs)
        finally:
            _TOOL_CALL_ID.reset(token)


def code_mode_langchain_tool(
    executor: CodeExecutor, scope: str | None = None, *, sdk_in_description: bool = True
) -> StructuredTool:
    """A ``StructuredTool`` named ``run_code`` that runs programs on ``executor``.

    The tool does not own the executor; see the module docstring for where a sync
    ``invoke`` runs the program.

    Args:
        executor: runs the programs (in ``code`` or ``both`` mode).
        scope: the tool view the programs (and the SDK text) get.
        sdk_in_description: put the code-only rule and the SDK in the description
            (``False``: the short description only; give the agent
            ``system_prompt(executor, scope)`` then).

    Raises:
        ExecutorConfigError: the executor is in ``native`` mode (it has no ``run_code``).
        UnknownScopeError: ``scope`` is not one of the registry's scopes.
    """
    if executor.mode == "native":
        raise ExecutorConfigError(
            "code_mode_langchain_tool needs an executor in 'code' or 'both' mode, not 'native'"
        )
    executor.registry.check_scope(scope)
    schema = executor.run_code_schema()
    description = schema["description"]
    if sdk_in_description:
        rule = CODE_ONLY_RULE if executor.mode == "code" else ""
        description = "\n\n".join(
            part for part in (description, rule, executor.sdk_text(scope)) if part
        )
    home = _current_token()  # the loop the tool was made in, if any

    async def run_async(**arguments: Any) -> tuple[Content, Any]:
        call_id = _TOOL_CALL_ID.get() or new_call_id(RUN_CODE)
        call = ModelCall(call_id=call_id, name=RUN_CODE, arguments=arguments)
        return tool_output(await executor.execute([call], scope=scope))

    def run_sync(**arguments: Any) -> tuple[Content, Any]:
        call_id = _TOOL_CALL_ID.get()  # (the loop's task starts from a fresh context)

        async def run() -> tuple[Content, Any]:
            token = _TOOL_CALL_ID.set(call_id)
            try:
                return await run_async(**arguments)
            finally:
                _TOOL_CALL_ID.reset(token)

        return _blocking(run, home, executor)

    return _CodeModeTool(
        name=RUN_CODE,
        description=description,
        args_schema=schema["parameters"],
        func=run_sync,
        coroutine=run_async,
        response_format="content_and_artifact",
        handle_tool_error=True,
    )


def tool_output(batch: BatchResult) -> tuple[Content, Any]:
    """A one-call batch as ``(content, artifact)``; a failure raises ``ToolException``.

    Raises:
        ToolException: the call failed; its message is the ``Error: ...`` text.
    """
    result = batch.results[0].result
    parts = [*_parts(result.content), *_contexts(batch)]
    if not isinstance(result, ToolSuccess):
        raise ToolException("\n".join(part for part in parts if isinstance(part, str)))
    content: Content
    if all(isinstance(part, str) for part in parts):
        content = "\n".join(part for part in parts if isinstance(part, str))
    else:
        content = [
            {"type": "text", "text": part}
            if isinstance(part, str)
            else {"type": "image", "base64": part.data, "mime_type": part.media_type}
            for part in parts
        ]
    return content, result.value


# --------------------------------------------------------------------------- sync calls


def _current_token() -> anyio.lowlevel.EventLoopToken | None:
    try:
        return anyio.lowlevel.current_token()
    except anyio.NoEventLoopError:
        return None


def _blocking(
    run: Callable[[], Coroutine[Any, Any, T]],
    home: anyio.lowlevel.EventLoopToken | None,
    executor: CodeExecutor,
) -> T:
    """``await run()`` from sync code: in ``home``, else in the background loop."""
    if _current_token() is not None:
        raise RuntimeError(
            "run_code's sync invoke() was called inside a running event loop, which it "
            "would block while the run may need it; await tool.ainvoke(...) instead"
        )
    if home is not None:
        try:
            return anyio.from_thread.run(run, token=home)
        except anyio.RunFinishedError:
            raise RuntimeError(
                "the event loop this run_code tool was made in has ended, and its "
                "executor belongs to it; make the tool again where the executor runs"
            ) from None
    return _BACKGROUND.call(run, executor)


class _BackgroundLoop:
    """One event loop in a daemon thread, for sync calls made where no loop runs.

    The executors it ran are closed in it at exit (their runtimes' workers belong to
    this loop); a daemon thread, so an interpreter exiting does not wait for it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._portal: anyio.from_thread.BlockingPortal | None = None
        self._thread: threading.Thread | None = None
        self._executors: dict[int, CodeExecutor] = {}

    def call(self, run: Callable[[], Awaitable[T]], executor: CodeExecutor) -> T:
        portal = self._start()
        with self._lock:
            self._executors.setdefault(id(executor), executor)
        return portal.call(run)

    def _start(self) -> anyio.from_thread.BlockingPortal:
        with self._lock:
            if self._portal is not None:
                return self._portal
            started = threading.Event()

            async def serve() -> None:
                async with anyio.from_thread.BlockingPortal() as portal:
                    self._portal = portal
                    started.set()
                    await portal.sleep_until_stopped()

            def main() -> None:
                try:
                    anyio.run(serve)
                finally:
                    started.set()  # (a loop that could not start wakes the caller too)

            self._thread = threading.Thread(target=main, name="ptc-adapters-loop", daemon=True)
            self._thread.start()
            started.wait()
            if self._portal is None:  # pragma: no cover - anyio.run failed at once
                raise RuntimeError("the adapters' background event loop did not start")
            atexit.register(self.close)
            return self._portal

    def close(self) -> None:
        """Close the executors this loop ran, then stop it (idempotent)."""
        with self._lock:
            portal, thread, self._portal, self._thread = self._portal, self._thread, None, None
            executors, self._executors = list(self._executors.values()), {}
        if portal is None or thread is None:
            return
        atexit.unregister(self.close)
        for executor in executors:
            try:
                portal.call(executor.aclose)
            except Exception:  # one that fails to close does not keep the others open
                logger.exception("closing an executor in the adapters' event loop failed")
        portal.call(portal.stop)
        thread.join()


_BACKGROUND = _BackgroundLoop()
