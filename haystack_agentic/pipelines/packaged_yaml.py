# SPDX-License-Identifier: Apache-2.0
"""
The packaged YAML files written for people: only the init parameters that differ from the defaults, a comment per
component, one connection per line, and a document store two components share written once (`&store`, `*store`).
`Pipeline.loads` ignores the comments and fills in the defaults, so a file loads into the pipeline it was made from.
"""

import importlib
import inspect
import textwrap
from enum import Enum
from typing import Any

import yaml
from haystack import Pipeline

from haystack_agentic.pipelines.yaml_notes import COMPONENT_NOTES, FILE_NOTES, GENERATED_NOTE, NAME_NOTES


def class_defaults(type_path: str) -> dict[str, Any] | None:
    """The defaults of `type_path`'s `__init__` parameters, or `None` when the class cannot be imported."""
    module, _, name = type_path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
        parameters = inspect.signature(cls.__init__).parameters.values()
    except (ImportError, AttributeError, TypeError, ValueError):
        return None
    return {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}


def _is_default(value: Any, default: Any) -> bool:
    """Whether a serialised init parameter equals the parameter's default (serialised the way Haystack does)."""
    if isinstance(default, Enum):
        default = default.value
    elif hasattr(default, "to_dict") and not isinstance(default, type):
        default = default.to_dict()  # e.g. Secret.from_env_var("OPENAI_API_KEY")
    if isinstance(value, bool) != isinstance(default, bool):  # True == 1 in Python, not in a YAML file
        return False
    if default is None and value in ({}, []):  # `x or {}` in __init__: None serialises as an empty container
        return True
    return value == default


def minimal(node: Any, top_level: bool = True) -> Any:
    """
    A serialised pipeline (or part) without the init parameters equal to their class's defaults, nested objects
    included. A component left with no parameters loses `init_parameters`; a nested object keeps an empty one (some
    integrations' `from_dict` read it unconditionally). `top_level`: `node` is a pipeline or a `components` entry.
    """
    if isinstance(node, list):
        return [minimal(value, top_level=False) for value in node]
    if not isinstance(node, dict):
        return node
    params = node.get("init_parameters")
    if isinstance(node.get("type"), str) and isinstance(params, dict):
        defaults = class_defaults(node["type"]) or {}
        kept = {
            key: minimal(value, top_level=False)
            for key, value in sorted(params.items())
            if not (key in defaults and _is_default(value, defaults[key]))
        }
        return {"type": node["type"], **({"init_parameters": kept} if kept or not top_level else {})}
    if top_level and "components" in node:
        return {**node, "components": {name: minimal(spec) for name, spec in node["components"].items()}}
    return {key: minimal(value, top_level=False) for key, value in node.items()}


class _Dumper(yaml.SafeDumper):
    """Block style with `|` for multi-line text; anchors only for document stores shared between components."""

    def ignore_aliases(self, data: Any) -> bool:
        return not (isinstance(data, dict) and str(data.get("type", "")).endswith("DocumentStore"))

    def generate_anchor(self, node: Any) -> str:
        self.anchor_count = getattr(self, "anchor_count", 0) + 1
        return "store" if self.anchor_count == 1 else f"store{self.anchor_count}"


def _text(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


_Dumper.add_representer(str, _text)


def _share_stores(components: dict[str, Any]) -> None:
    """Make equal document store mappings one object, so the YAML defines each store once."""
    seen: list[dict[str, Any]] = []

    def visit(node: Any) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            if isinstance(value, dict) and str(value.get("type", "")).endswith("DocumentStore"):
                node[key] = next((s for s in seen if s == value), value)
                if node[key] is value:
                    seen.append(value)
            visit(value)

    visit(components)


def _comment(text: str, indent: str = "", width: int = 118) -> str:
    """`text` as comment lines of at most `width` columns; each of its lines starts a new comment line."""
    lines = [part for line in text.strip().splitlines() for part in textwrap.wrap(line, width - len(indent) - 2)]
    return "".join(f"{indent}# {line}\n" for line in lines)


def _component_note(name: str, spec: dict[str, Any]) -> str:
    class_name = spec["type"].rpartition(".")[2]
    note = NAME_NOTES.get(name) or COMPONENT_NOTES.get(class_name)
    if note is None:
        raise KeyError(f"No comment for component {name!r} ({class_name}): add one to yaml_notes.COMPONENT_NOTES.")
    return f"{name} ({class_name}): {note}"


def packaged_yaml(pipeline: Pipeline, file_name: str) -> str:
    """
    The YAML text of a packaged pipeline (`file_name`, e.g. `agentic_rag_embedded.yml`, picks the header comment).

    :raises KeyError: If the file or one of its components has no comment in `yaml_notes`.
    """
    data = minimal(pipeline.to_dict())
    # Sorted by name as `Pipeline.dumps` does (their order decides the connections' order in `to_dict()`).
    components = dict(sorted(data["components"].items()))
    _share_stores(components)
    body = yaml.dump({"components": components}, Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)
    out = [_comment(FILE_NOTES[file_name]), _comment(GENERATED_NOTE), "\n"]
    for line in body.splitlines(keepends=True):
        name = line.strip()[:-1]
        if line.startswith("  ") and not line.startswith("   ") and name in components:
            out.append(("\n" if out[-1] != "components:\n" else "") + _comment(_component_note(name, components[name]), "  "))
        out.append(line)
    out.append("\nconnections:\n")
    for connection in data["connections"]:
        out.append(f"- {{sender: {connection['sender']}, receiver: {connection['receiver']}}}\n")
    rest = {k: v for k, v in data.items() if k not in ("components", "connections")}
    if rest.get("connection_type_validation") is True:  # the default
        del rest["connection_type_validation"]
    out.append("\n" + yaml.dump(rest, Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True))
    return "".join(out)
