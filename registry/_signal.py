"""A caller-owned cancellation signal that works with or without a running loop."""

from __future__ import annotations

from collections.abc import Callable

import anyio

__all__ = ["AbortSignal"]


class AbortSignal:
    """A one-shot cancellation flag with listeners.

    The caller owns the signal and calls :meth:`abort`; the pipeline and tool
    bodies observe it. It may be created outside an event loop. Listeners run
    synchronously inside :meth:`abort`, so :meth:`abort` must be called from
    the event loop thread that runs the calls it cancels.
    """

    __slots__ = ("_aborted", "_listeners", "_next_key", "_reason")

    def __init__(self) -> None:
        self._aborted = False
        self._reason: object = None
        self._listeners: dict[int, Callable[[], None]] = {}
        self._next_key = 0

    @property
    def aborted(self) -> bool:
        """Whether :meth:`abort` has been called."""
        return self._aborted

    @property
    def reason(self) -> object:
        """The reason given to :meth:`abort` (``None`` before it)."""
        return self._reason

    def abort(self, reason: object = "aborted") -> None:
        """Fire the signal once; later calls are ignored."""
        if self._aborted:
            return
        self._aborted = True
        self._reason = reason
        listeners = list(self._listeners.values())
        self._listeners.clear()
        for listener in listeners:
            listener()

    def add_listener(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` once when the signal fires; returns its disposer.

        A listener added to an aborted signal runs immediately.
        """
        if self._aborted:
            listener()
            return _noop
        key = self._next_key
        self._next_key = key + 1
        self._listeners[key] = listener

        def dispose() -> None:
            self._listeners.pop(key, None)

        return dispose

    async def wait(self) -> None:
        """Return once the signal has fired."""
        if self._aborted:
            return
        event = anyio.Event()
        dispose = self.add_listener(event.set)
        try:
            await event.wait()
        finally:
            dispose()

    @classmethod
    def any(cls, *signals: AbortSignal | None) -> tuple[AbortSignal, Callable[[], None]]:
        """A signal that fires when any of ``signals`` fires (first reason wins).

        Returns the fused signal and a disposer that detaches it from its
        sources; call the disposer when the fused signal is no longer needed so
        long-lived sources do not accumulate listeners.
        """
        if len(signals) == 2 and signals[0] is signals[1] and signals[0] is not None:
            return signals[0], _noop  # the hot path: a wrapper kept the caller's signal
        present = list(dict.fromkeys(s for s in signals if s is not None))
        if not present:
            return cls(), _noop
        if len(present) == 1:
            return present[0], _noop
        fused = cls()
        for signal in present:
            if signal.aborted:
                fused.abort(signal.reason)
                return fused, _noop

        def forward(source: AbortSignal) -> Callable[[], None]:
            return lambda: fused.abort(source.reason)

        disposers = [signal.add_listener(forward(signal)) for signal in present]

        def dispose() -> None:
            for d in disposers:
                d()

        return fused, dispose

    def __repr__(self) -> str:
        state = f"aborted reason={self._reason!r}" if self._aborted else "pending"
        return f"<AbortSignal {state}>"


def _noop() -> None:
    return None
