"""One definition of lossless JSON on both sides of the sandbox.

The registry (host, copying: ``snapshot_json``) and the workers (checking:
``runtime._worker._wire.check_json``, shared by the CPython and Pyodide
workers) live in packages that may not import each other, so this test holds
them to the same verdicts. Known, deliberate differences: the depth limit (the
wire's 250 leaves room for the host's own wrapping below the registry's 255) and
lone surrogates (refused on the worker side by its encoder, not by the check).
"""

from __future__ import annotations

import enum
import math
from typing import Any

import pytest

from registry import NotJsonError as RegistryNotJson
from registry import snapshot_json
from runtime._worker._wire import NotJsonError as WorkerNotJson
from runtime._worker._wire import check_json


class _Color(enum.IntEnum):
    RED = 1


class _Str(str):
    pass


VALUES: list[Any] = [
    None,
    True,
    0,
    -(2**63),
    2**64 - 1,
    2**64,
    -(2**63) - 1,
    1.5,
    math.nan,
    math.inf,
    "text",
    "é",
    [],
    {},
    {"a": [1, {"b": None}]},
    {1: "x"},
    (1, 2),
    {1, 2},
    b"bytes",
    _Color.RED,
    _Str("x"),
    {"k": _Str("x")},
    [1.0, [math.nan]],
    object(),
]


def _registry_accepts(value: Any) -> bool:
    try:
        snapshot_json(value)
    except RegistryNotJson:
        return False
    return True


def _worker_accepts(value: Any) -> bool:
    try:
        check_json(value)
    except WorkerNotJson:
        return False
    return True


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_host_and_worker_agree_on_what_is_json(value: Any) -> None:
    assert _registry_accepts(value) == _worker_accepts(value)


def _nest(levels: int) -> Any:
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


def test_both_refuse_what_nests_past_the_registry_limit() -> None:
    # Up to the wire's limit both accept; past the registry's both refuse.
    assert _registry_accepts(_nest(250)) and _worker_accepts(_nest(250))
    assert not _registry_accepts(_nest(256)) and not _worker_accepts(_nest(256))
