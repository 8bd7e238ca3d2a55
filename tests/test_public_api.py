# SPDX-License-Identifier: Apache-2.0
"""The package uses only public names of its dependencies: no `from dep import _name`, no `dep._name`, no
`obj._attr` read on another library's object through a module alias. The names still used are listed below as
debt (issue 24); the list must shrink, never grow, and must stay exact."""

import ast
from pathlib import Path

import haystack_agentic

PACKAGE = Path(haystack_agentic.__file__).parent

#: Private names of dependencies still imported, as `module:name` (to be replaced by public API).
KNOWN_PRIVATE_IMPORTS = {
    "haystack.token_counters.utils:_non_text_tokens",
    "haystack.token_counters.utils:_render_message",
    "haystack.token_counters.utils:_rendered_tools",
    "haystack.components.agents.tool_calling:_result_to_string",
    "haystack.components.agents.tool_calling:_run_tool",
}


#: Every module of the package, parsed once: path -> AST.
TREES = {path: ast.parse(path.read_text(encoding="utf-8"), filename=str(path)) for path in PACKAGE.rglob("*.py")}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_imports() -> set[str]:
    found: set[str] = set()
    for tree in TREES.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module.split(".")[0] == "haystack_agentic":
                    continue
                if any(_private(part) for part in node.module.split(".")):
                    found.add(f"{node.module}:*")
                found.update(f"{node.module}:{a.name}" for a in node.names if _private(a.name))
            elif isinstance(node, ast.Import):
                found.update(
                    f"{a.name}:*" for a in node.names
                    if not a.name.startswith("haystack_agentic") and any(_private(p) for p in a.name.split("."))
                )  # fmt: skip
    return found


def _dependency_modules() -> dict[Path, set[str]]:
    """Per file, the local names bound to a dependency's module (`import hayhooks`, `import haystack.x as y`)."""
    bound: dict[Path, set[str]] = {}
    for path, tree in TREES.items():
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if not alias.name.startswith("haystack_agentic"):
                        names.add(alias.asname or alias.name.split(".")[0])
        bound[path] = names
    return bound


def test_no_new_private_import_from_a_dependency():
    found = _private_imports()
    assert found - KNOWN_PRIVATE_IMPORTS == set(), "private names of a dependency imported; use its public API"
    assert KNOWN_PRIVATE_IMPORTS - found == set(), "a listed private import is gone: remove it from the list"


def test_no_private_attribute_of_a_dependency_module():
    offences = []
    for path, modules in _dependency_modules().items():
        for node in ast.walk(TREES[path]):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                base = node.value
                while isinstance(base, ast.Attribute):
                    base = base.value
                if isinstance(base, ast.Name) and base.id in modules:
                    offences.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {ast.unparse(node)}")
    assert offences == []
