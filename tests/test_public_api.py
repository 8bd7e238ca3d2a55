# SPDX-License-Identifier: Apache-2.0
"""The package uses only public names of its dependencies: no `from dep import _name`, no `dep._name`, and no
`obj._attr` (or `getattr(obj, "_attr")`) read of a private name the package does not define itself, which is how a
read of another library's private state (a store's statistics, a socket dict) shows in the AST."""

import ast
from pathlib import Path

import haystack_agentic

PACKAGE = Path(haystack_agentic.__file__).parent

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
                    f"{a.name}:*"
                    for a in node.names
                    if not a.name.startswith("haystack_agentic") and any(_private(p) for p in a.name.split("."))
                )
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
    assert _private_imports() == set(), "private names of a dependency imported; use its public API"


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


def _names_defined_by_the_package() -> set[str]:
    """Every name the package binds: functions, classes, attributes it assigns, variables, parameters, imports."""
    names: set[str] = set()
    for tree in TREES.values():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.alias):
                names.add(node.asname or node.name.split(".")[-1])
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):  # self.__dict__["_x"] = ...
                if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                    names.add(node.slice.value)
    return names


def test_no_private_attribute_the_package_does_not_define():
    defined = _names_defined_by_the_package()
    offences = []
    for path, tree in TREES.items():
        for node in ast.walk(tree):
            name = None
            if isinstance(node, ast.Attribute):
                name = node.attr
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr", "setattr")
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
            ):
                name = node.args[1].value
            if name and _private(name) and name not in defined:
                offences.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {name}")
    assert offences == [], "private attributes of another library read; use its public API"
