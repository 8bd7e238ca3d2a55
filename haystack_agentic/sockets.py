# SPDX-License-Identifier: Apache-2.0
"""
A component's input and output sockets through Haystack's public API.

A component's input and output sockets through Haystack's public API (`Pipeline.inputs` / `Pipeline.outputs`):
Haystack keeps them in attributes of its own, and names no public way to read one component's.
"""

from typing import Any

from haystack import Pipeline
from haystack.core.errors import PipelineError, PipelineValidationError

#: The name a component gets in the throwaway pipeline that reads its sockets.
PROBE_NAME = "component"


class NotAComponentError(ValueError):
    """What `component_sockets` was given is not a Haystack component (no `@component` class)."""


def component_sockets(instance: Any) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """
    A component's input and output sockets, as `(inputs, outputs)`.

    A component's sockets: `(inputs, outputs)`, each socket name -> its description (`type`; inputs also
    `is_mandatory` and, when optional, `default_value`), as `Pipeline.inputs()` / `Pipeline.outputs()` give them.

    The component goes into a throwaway `Pipeline` and comes out again (`remove_component` frees it for the next
    one), so it must be in no pipeline when this is called.

    :param instance: A Haystack component instance.
    :returns: Its input and output sockets.
    :raises NotAComponentError: If `instance` is not a Haystack component.
    :raises ValueError: If it is already in a pipeline (read that pipeline's `inputs()` / `outputs()` instead).
    """
    probe = Pipeline()
    try:
        probe.add_component(PROBE_NAME, instance)
    except (PipelineValidationError, AttributeError) as exc:  # no `run`; a `run` without `@component`: no sockets
        msg = f"{type(instance).__name__} is not a Haystack component."
        raise NotAComponentError(msg) from exc
    except PipelineError as exc:
        msg = f"{type(instance).__name__} is already in a pipeline: {exc}"
        raise ValueError(msg) from exc
    try:
        inputs = probe.inputs(include_components_with_connected_inputs=True).get(PROBE_NAME, {})
        outputs = probe.outputs(include_components_with_connected_outputs=True).get(PROBE_NAME, {})
    finally:
        probe.remove_component(PROBE_NAME)
    return inputs, outputs
