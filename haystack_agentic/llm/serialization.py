# SPDX-License-Identifier: Apache-2.0
"""(De)serialisation and warm-up of a chat generator held by a component, the way Haystack's Agent does it."""

from typing import Any

from haystack.core.serialization import component_to_dict, default_from_dict, default_to_dict
from haystack.utils import deserialize_callable, deserialize_chatgenerator_inplace, serialize_callable


def generator_to_dict(generator: Any) -> dict[str, Any] | None:
    """Serialize an optional chat generator the way Haystack's Agent does (`None` stays `None`)."""
    return None if generator is None else component_to_dict(obj=generator, name="chat_generator")


def generator_from_dict_inplace(init_params: dict[str, Any]) -> None:
    """Deserialize an optional `chat_generator` and `streaming_callback` in `init_params`, in place."""
    if init_params.get("chat_generator") is not None:
        deserialize_chatgenerator_inplace(init_params, key="chat_generator")
    if init_params.get("streaming_callback"):
        init_params["streaming_callback"] = deserialize_callable(init_params["streaming_callback"])


def role_from_dict(cls: type, data: dict[str, Any]) -> Any:
    """The component of class `cls` from its `to_dict` output `data`, with its chat generator and callback."""
    generator_from_dict_inplace(data.get("init_parameters", {}))
    return default_from_dict(cls, data)


def warm_up_generator(generator: Any) -> None:
    """Warm up an optional chat generator if it has a `warm_up` method."""
    if generator is not None and hasattr(generator, "warm_up"):
        generator.warm_up()


#: The init parameters every LLM role component (answerer, fallback) holds besides its `chat_generator`.
ROLE_PARAMETERS = (
    "temperature",
    "generation_kwargs",
    "max_retries",
    "timeout",
    "context_budget_tokens",
    "system_prompt",
)


def role_to_dict(role_component: Any, *parameters: str) -> dict[str, Any]:
    """Serialise an LLM role component: its chat generator, the `ROLE_PARAMETERS` and its other `parameters`."""
    values = {name: getattr(role_component, name) for name in (*ROLE_PARAMETERS, *parameters)}
    if hasattr(role_component, "streaming_callback"):
        callback = role_component.streaming_callback
        values["streaming_callback"] = serialize_callable(callback) if callback is not None else None
    return default_to_dict(role_component, chat_generator=generator_to_dict(role_component.chat_generator), **values)
