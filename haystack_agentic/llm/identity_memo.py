# SPDX-License-Identifier: Apache-2.0
"""Values computed from objects never changed in place (a `ChatMessage` is not hashable), kept while each lives."""

import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class IdentityMemo(Generic[V]):
    """
    `get(obj, compute)`: `compute(obj)` the first time, the stored value while `obj` lives (by identity and a weak
    reference; objects that cannot be weakly referenced are computed every time). A value must not refer to its
    object (the memo would keep the object alive). Thread-safe (a race computes a value twice).
    """

    def __init__(self) -> None:
        self._values: dict[int, tuple[weakref.ref, V]] = {}

    def get(self, obj: Any, compute: Callable[[Any], V]) -> V:
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
