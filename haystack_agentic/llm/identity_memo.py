# SPDX-License-Identifier: Apache-2.0
"""
`IdentityMemo`: values computed from an object that is never changed in place (a `ChatMessage`, which is not
hashable), looked up by identity and dropped when the object goes away (a weak reference), so none is kept alive.
"""

import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class IdentityMemo(Generic[V]):
    """
    `get(obj, compute)`: `compute(obj)` the first time for `obj`, the stored value afterwards, while `obj` lives.

    Objects that cannot be weakly referenced are computed every time. A value must not refer to its object (the
    memo would keep the object alive). Thread-safe (a race computes a value twice).
    """

    def __init__(self) -> None:
        self._values: dict[int, tuple[weakref.ref, V]] = {}

    def get(self, obj: Any, compute: Callable[[Any], V]) -> V:
        """The value computed from `obj` (by identity); `compute(obj)` when it is not stored yet."""
        key = id(obj)
        entry = self._values.get(key)
        if entry is not None and entry[0]() is obj:
            return entry[1]
        value = compute(obj)
        try:
            # The callback runs when `obj` is freed, before its id can be given to another object.
            ref = weakref.ref(obj, lambda _, key=key, values=self._values: values.pop(key, None))
        except TypeError:
            return value
        self._values[key] = (ref, value)
        return value

    def __len__(self) -> int:
        return len(self._values)
