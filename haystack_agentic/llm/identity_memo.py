# SPDX-License-Identifier: Apache-2.0
"""
`IdentityMemo`: values computed from an object that is never changed in place, kept for as long as the object
lives, looked up by the object's identity.

Haystack's `ChatMessage` is such an object (a dataclass that warns when mutated, so not hashable): the loop sends
a growing conversation every turn, and what it derives from each message (its token count, the digest sent in
place of an older tool result) is the same every turn. Keying by identity instead of by value costs nothing to
look up, and a weak reference drops the entry when the message goes away, so the memo holds no message alive.
"""

import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class IdentityMemo(Generic[V]):
    """
    `get(obj, compute)`: `compute(obj)` the first time for `obj`, the stored value afterwards, while `obj` lives.

    Only for objects that are not changed in place after the first `get`; objects that cannot be weakly referenced
    are computed every time. A value must not refer to its object (the memo would keep the object alive). Safe to
    share between threads and concurrent runs (a race computes a value twice).
    """

    def __init__(self) -> None:
        self._values: dict[int, tuple[weakref.ref, V]] = {}

    def get(self, obj: Any, compute: Callable[[Any], V]) -> V:
        """
        The value computed from `obj`.

        :param obj: The object (by identity).
        :param compute: Computes the value from `obj` when it is not stored yet.
        :returns: The value.
        """
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
