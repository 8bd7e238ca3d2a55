# SPDX-License-Identifier: Apache-2.0
"""The package's shape: no import cycles between its modules, and a cheap `import haystack_agentic`."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import haystack_agentic

PACKAGE = Path(haystack_agentic.__file__).parent


def _module_name(path: Path, package_dir: Path) -> str:
    parts = path.relative_to(package_dir.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_graph(package_dir: Path = PACKAGE, exports: dict[str, str] | None = None) -> dict[str, set[str]]:
    """Every module of the package -> the package modules it imports (function-level imports included,
    `if TYPE_CHECKING:` blocks excluded). `from <package> import Name` counts as importing `exports[Name]`, the
    module a lazily exported name comes from (default: the package's `_EXPORTS`)."""
    if exports is None:
        exports = getattr(haystack_agentic, "_EXPORTS", {}) if package_dir == PACKAGE else {}
    modules = {_module_name(p, package_dir): p for p in package_dir.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = {
            id(n)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and _is_type_checking(node)
            for n in ast.walk(node)
        }
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
                if node.module == package_dir.name:
                    targets += [exports[alias.name] for alias in node.names if alias.name in exports]
            for target in targets:
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each one an import cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_the_package_has_no_import_cycles():
    cycles = find_cycles(import_graph())
    assert cycles == [], f"import cycles between modules: {cycles}"


def test_the_cycle_check_finds_a_cycle(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from pkg.b import g\n")
    (package / "b.py").write_text("from pkg import a\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import f\n")
    assert find_cycles(import_graph(package)) == [["pkg.a", "pkg.b"]]


def test_importing_the_package_imports_no_cli_and_no_component():
    code = "import sys, haystack_agentic; print(sorted(m for m in sys.modules if m.startswith('haystack_agentic.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_public_names_load_on_first_use():
    from haystack_agentic import AgenticRouter, LoopState

    assert AgenticRouter.__module__ == "haystack_agentic.components.routers.agentic_router"
    assert LoopState.__module__ == "haystack_agentic.dataclasses.loop_state"
    assert set(haystack_agentic.__all__) <= set(dir(haystack_agentic))
    # the written-out `__all__` (ruff reads it as a literal) names exactly what loads lazily, plus ALLOWED_MODULES
    assert sorted(haystack_agentic.__all__) == sorted([*haystack_agentic._EXPORTS, "ALLOWED_MODULES"])


#: Most lines a module of the package may have (the style asks for about 400).
MAX_MODULE_LINES = 450


def module_sizes(package_dir: Path = PACKAGE) -> dict[str, int]:
    """Lines of every module of the package, by path relative to the package folder."""
    return {
        path.relative_to(package_dir).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in sorted(package_dir.rglob("*.py"))
    }


def test_no_module_is_longer_than_the_limit():
    too_long = {name: lines for name, lines in module_sizes().items() if lines > MAX_MODULE_LINES}
    assert too_long == {}, f"modules over {MAX_MODULE_LINES} lines (split them by responsibility): {too_long}"


def test_the_size_check_sees_a_long_module(tmp_path):
    (tmp_path / "short.py").write_text("x = 1\n")
    (tmp_path / "long.py").write_text("x = 1\n" * (MAX_MODULE_LINES + 1))
    assert module_sizes(tmp_path) == {"long.py": MAX_MODULE_LINES + 1, "short.py": 1}


#: The functions of the package that write `os.environ`: what hayhooks and the server processes read, and Haystack's
#: telemetry switch (read only from the environment, when haystack is first imported).
ENVIRONMENT_WRITERS = {("cli/serve.py", "set_serving_environment"), ("cli/common.py", "telemetry_off_unless_asked")}


def environment_writes(package_dir: Path = PACKAGE) -> list[tuple[str, str, int]]:
    """Every place a module writes the process environment: `(path, enclosing function, line)`. A write is an
    assignment to or deletion of `os.environ[...]`, a mutating method of `os.environ`, `os.environ` passed to a
    call (which may write it), or `os.putenv` / `os.unsetenv`."""

    def is_environ(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Attribute)
            and node.attr == "environ"
            and isinstance(node.value, ast.Name)
            and (node.value.id == "os")
        )

    found = []
    for path in sorted(package_dir.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        owner = {
            id(n): f.name
            for f in ast.walk(tree)
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
            for n in ast.walk(f)
        }  # innermost last: nested functions overwrite their parent's name
        for node in ast.walk(tree):
            write = (
                isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete))
                and any(
                    isinstance(t, ast.Subscript) and is_environ(t.value)
                    for t in (node.targets if not isinstance(node, ast.AugAssign) else [node.target])
                )
            ) or (
                isinstance(node, ast.Call)
                and (
                    (
                        isinstance(node.func, ast.Attribute)
                        and is_environ(node.func.value)
                        and node.func.attr in ("setdefault", "update", "pop", "popitem", "clear", "__setitem__")
                    )
                    or any(is_environ(arg) for arg in [*node.args, *(k.value for k in node.keywords)])
                    or (isinstance(node.func, ast.Attribute) and node.func.attr in ("putenv", "unsetenv"))
                )
            )
            if write:
                found.append((path.relative_to(package_dir).as_posix(), owner.get(id(node), "<module>"), node.lineno))
    return sorted(found, key=lambda item: (item[0], item[2]))


def test_only_serve_writes_the_environment():
    others = [
        (path, function, line)
        for path, function, line in environment_writes()
        if (path, function) not in ENVIRONMENT_WRITERS
    ]
    assert others == [], f"os.environ written outside {ENVIRONMENT_WRITERS}: pass the value explicitly instead"
    assert {(p, f) for p, f, _ in environment_writes()} == ENVIRONMENT_WRITERS


def test_the_environment_check_sees_every_kind_of_write(tmp_path):
    (tmp_path / "m.py").write_text(
        "import os\nos.environ['A'] = '1'\ndef f():\n    os.environ.setdefault('B', '1')\n"
        "    del os.environ['C']\n    os.putenv('D', '1')\n    g(os.environ)\n    return os.environ.get('E')\n"
    )
    assert environment_writes(tmp_path) == [
        ("m.py", "<module>", 2),
        ("m.py", "f", 4),
        ("m.py", "f", 5),
        ("m.py", "f", 6),
        ("m.py", "f", 7),
    ]


#: Layers that must not import the ones above them: package prefix -> prefixes it may not import.
LAYERS = {
    "haystack_agentic.components": ("haystack_agentic.pipelines", "haystack_agentic.cli", "haystack_agentic.serving"),
    "haystack_agentic.serving": ("haystack_agentic.cli",),
}


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def layer_violations(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """`(module, imported module)` for every import of a higher layer (`LAYERS`), function-level imports included."""
    return sorted(
        (module, target)
        for module, targets in graph.items()
        for layer, forbidden in LAYERS.items()
        if _under(module, layer)
        for target in targets
        if any(_under(target, prefix) for prefix in forbidden)
    )


def test_components_import_no_pipelines_cli_or_serving_and_serving_no_cli():
    violations = layer_violations(import_graph())
    assert violations == [], f"imports of a higher layer (move what is shared to a lower module): {violations}"


def test_the_layer_check_sees_a_function_level_import(tmp_path):
    package = tmp_path / "haystack_agentic"
    for folder in ("components/loop", "pipelines", "serving", "cli"):
        (package / folder).mkdir(parents=True)
    for init in ("", "components", "components/loop", "pipelines", "serving", "cli"):
        (package / init / "__init__.py").write_text("")
    (package / "pipelines" / "builder.py").write_text("def build(): ...\n")
    (package / "cli" / "output.py").write_text("def lines(): ...\n")
    (package / "components" / "loop" / "rag.py").write_text(
        "def load():\n    from haystack_agentic.pipelines.builder import build\n"
    )
    (package / "serving" / "app.py").write_text("import haystack_agentic.cli.output\n")
    (package / "pipelines" / "uses.py").write_text("from haystack_agentic.components.loop import rag\n")
    (package / "components" / "lazy.py").write_text("from haystack_agentic import build\n")  # a lazy export
    exports = {"build": "haystack_agentic.pipelines.builder"}
    assert layer_violations(import_graph(package, exports)) == [
        ("haystack_agentic.components.lazy", "haystack_agentic.pipelines.builder"),
        ("haystack_agentic.components.loop.rag", "haystack_agentic.pipelines.builder"),
        ("haystack_agentic.serving.app", "haystack_agentic.cli.output"),
    ]


#: Class-name comparisons allowed: `(path, function)`. None: compare with `isinstance` (a class of an optional package
#: taken from `sys.modules`, which imports nothing).
NAME_TYPE_CHECKS: set[tuple[str, str]] = set()


def name_type_checks(package_dir: Path = PACKAGE) -> list[tuple[str, str, int]]:
    """Every type check by class-name string: `(path, enclosing function, line)` of a comparison (`==`, `!=`, `in`,
    `not in`) with `<anything>.__name__` on either side (`if __name__ == "__main__"` is a name, not an attribute)."""
    found = []
    for path in sorted(package_dir.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        owner = {
            id(n): f.name
            for f in ast.walk(tree)
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
            for n in ast.walk(f)
        }  # innermost last: nested functions overwrite their parent's name
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Compare)
                and any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops)
                and any(
                    isinstance(side, ast.Attribute) and side.attr == "__name__"
                    for side in (node.left, *node.comparators)
                )
            ):
                found.append((path.relative_to(package_dir).as_posix(), owner.get(id(node), "<module>"), node.lineno))
    return sorted(found, key=lambda item: (item[0], item[2]))


def test_types_are_checked_by_class_not_by_name():
    new = [
        (path, function, line)
        for path, function, line in name_type_checks()
        if (path, function) not in NAME_TYPE_CHECKS
    ]
    assert new == [], "type checks by class name: use isinstance (sys.modules.get for an optional package's class)"


def test_the_name_check_sees_every_kind_of_comparison(tmp_path):
    (tmp_path / "m.py").write_text(
        "def f(x):\n    return type(x).__name__ == 'A'\n"
        "def g(x):\n    return 'B' != type(x).__name__ or x.__class__.__name__ in ('C',)\n"
        "def h(x):\n    return any(c.__name__ not in NAMES for c in type(x).__mro__)\n"
        "if __name__ == '__main__':\n    print(type(1).__name__)\n"
    )
    assert name_type_checks(tmp_path) == [("m.py", "f", 2), ("m.py", "g", 4), ("m.py", "g", 4), ("m.py", "h", 6)]


#: The application: the package folders the library (everything else in the package) may not import.
APPLICATION = ("haystack_agentic.cli", "haystack_agentic.serving")
#: Top-level names of code outside the package that the library may not import or name: the benchmarks with the
#: evaluation harness, and the tests with their doubles (imported by module name, `tests/` being on the path).
OUTSIDE = ("benchmarks", "tests", *sorted(p.stem for p in (PACKAGE.parent / "tests").glob("*.py")))


def library_escapes(package_dir: Path = PACKAGE, outside: tuple[str, ...] = OUTSIDE) -> list[tuple[str, str]]:
    """`(library module, name)` for every import (function-level and `TYPE_CHECKING` ones included) or dotted string
    constant (a YAML `type`, an `importlib` target) of the library that names the application or code outside the
    package."""
    banned = (*APPLICATION, *outside)
    found = []
    for path in sorted(package_dir.rglob("*.py")):
        module = _module_name(path, package_dir)
        if any(_under(module, prefix) for prefix in APPLICATION):
            continue
        names: list[str] = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(r"[\w.]+", node.value):
                names.append(node.value)
        found += [(module, name) for name in names if any(_under(name, prefix) for prefix in banned)]
    return sorted(set(found))


def test_the_library_imports_no_application_benchmark_or_test_code():
    assert library_escapes() == [], "the library may not use cli/, serving/, benchmarks/ or tests/ (see README layout)"


def test_the_library_check_sees_every_kind_of_escape(tmp_path):
    package = tmp_path / "haystack_agentic"
    for folder in ("components", "cli", "serving"):
        (package / folder).mkdir(parents=True)
    (package / "cli" / "main.py").write_text("from haystack_agentic.serving import app\nimport benchmarks\n")  # may
    (package / "components" / "a.py").write_text(
        "import benchmarks.harness.metrics\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from haystack_agentic.cli.main import main\n"
        "def f():\n    from scripted_chat_generator import ScriptedChatGenerator\n"
        "TYPE = 'tests.doubles.Fake'\nTEXT = 'benchmarks are slow'\nfrom haystack_agentic.serving import app\n"
    )
    assert library_escapes(package, ("benchmarks", "tests", "scripted_chat_generator")) == [
        ("haystack_agentic.components.a", "benchmarks.harness.metrics"),
        ("haystack_agentic.components.a", "haystack_agentic.cli.main"),
        ("haystack_agentic.components.a", "haystack_agentic.cli.main.main"),
        ("haystack_agentic.components.a", "haystack_agentic.serving"),
        ("haystack_agentic.components.a", "haystack_agentic.serving.app"),
        ("haystack_agentic.components.a", "scripted_chat_generator"),
        ("haystack_agentic.components.a", "scripted_chat_generator.ScriptedChatGenerator"),
        ("haystack_agentic.components.a", "tests.doubles.Fake"),
    ]


#: A dunder of Haystack's component machinery (`__haystack_input__`, `__haystack_output__`, ...).
HAYSTACK_DUNDER = re.compile(r"__haystack_\w+__")


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def package_names(package_dir: Path = PACKAGE) -> set[str]:
    """Every name the package binds: functions, classes, arguments, assigned names and attributes, import aliases."""
    names: set[str] = set()
    for path in package_dir.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.alias) and node.asname:
                names.add(node.asname)
    return names


def _read_attributes(trees: list[ast.AST]) -> set[str]:
    """The attribute names the package reads (`x.name`, `getattr(x, "name")`)."""
    read = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                read.add(node.attr)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "getattr"
                and (len(node.args) > 1 and isinstance(node.args[1], ast.Constant))
            ):
                read.add(str(node.args[1].value))
    return read


def _private_overrides(tree: ast.AST, classes: set[str], read: set[str]) -> list[tuple[int, str]]:
    """`(line, name)` of the `_name` methods of a class with a base from outside the package that the package never
    calls itself: hooks of the dependency's own machinery (e.g. `Secret._to_dict`)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        bases = {ast.unparse(base).split("[")[0].rsplit(".", 1)[-1] for base in node.bases}
        if not bases - classes:
            continue
        for item in node.body:
            if (
                isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                and _is_private(item.name)
                and (item.name not in read)
            ):
                found.append((item.lineno, f"def {node.name}.{item.name}"))
    return found


def private_name_uses(package_dir: Path = PACKAGE) -> list[tuple[str, int, str]]:
    """
    Every use of a dependency's private name: `(path, line, what)` for an attribute `x._name` (also as
    `getattr`/`setattr`/`hasattr`/`delattr(x, "_name")`) whose `_name` the package never binds itself, a Haystack
    dunder (`__haystack_input__`, as an attribute or a string), an import of a `_`-prefixed name or module from
    outside the package, and a `_name` method the package never calls in a subclass of a dependency's class.
    """
    ours = package_names(package_dir)
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in sorted(package_dir.rglob("*.py"))}
    classes = {node.name for tree in trees.values() for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    read = _read_attributes(list(trees.values()))
    found = []
    for path, tree in trees.items():
        where = path.relative_to(package_dir).as_posix()
        found += [(where, line, what) for line, what in _private_overrides(tree, classes | {"object"}, read)]
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Attribute):
                names = [node.attr]
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
            ):
                names = [node.args[1].value]
            elif (
                isinstance(node, ast.Constant) and isinstance(node.value, str) and HAYSTACK_DUNDER.fullmatch(node.value)
            ):
                found.append((where, node.lineno, node.value))
            elif (
                isinstance(node, ast.ImportFrom)
                and node.level == 0
                and node.module
                and (node.module.split(".")[0] != package_dir.name)
            ):
                modules = [node.module]
                names = [f"import {node.module}.{alias.name}" for alias in node.names if _is_private(alias.name)]
                names += [f"import {m}" for m in modules if any(_is_private(part) for part in m.split("."))]
            elif isinstance(node, ast.Import):
                names = [
                    f"import {alias.name}"
                    for alias in node.names
                    if alias.name.split(".")[0] != package_dir.name
                    and any(_is_private(part) for part in alias.name.split("."))
                ]
            found += [
                (where, node.lineno, name)
                for name in names
                if name.startswith("import ")
                or HAYSTACK_DUNDER.fullmatch(name)
                or (_is_private(name) and name not in ours)
            ]
    return sorted(set(found))


def test_the_package_uses_no_private_name_of_a_dependency():
    uses = private_name_uses()
    assert uses == [], f"private names of dependencies (use their public API, see docs/decisions.md): {uses}"


def test_the_private_name_check_sees_every_kind_of_use(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "ours.py").write_text(
        "class Mine:\n    def __init__(self):\n        self._cache = {}\n    def _helper(self):\n"
        "        return self._cache, getattr(self, '_cache')\n"
    )
    (package / "theirs.py").write_text(
        "import haystack._private\nfrom haystack.utils.auth import _secret\nfrom hayhooks._internal import thing\n"
        "from pkg._own import fine\n"
        "def f(store, component, pipeline):\n"
        "    store._url\n    getattr(store, '_url', None)\n    component.__haystack_input__._sockets_dict\n"
        "    getattr(component, '__haystack_output__')\n    store.url, store.__class__, pipeline.inputs()\n"
        "    return Mine()._helper()\n"
        "class Key(Secret):\n    def _to_dict(self):\n        return self._helper()\n"
        "class Wrapper(BasePipelineWrapper):\n    def _helper(self):\n        return 1\n"
        "class Plain(Mine):\n    def _unused(self):\n        return 2\n"
    )
    assert private_name_uses(package) == [
        ("theirs.py", 1, "import haystack._private"),
        ("theirs.py", 2, "import haystack.utils.auth._secret"),
        ("theirs.py", 3, "import hayhooks._internal"),
        ("theirs.py", 6, "_url"),
        ("theirs.py", 7, "_url"),
        ("theirs.py", 8, "__haystack_input__"),
        ("theirs.py", 8, "_sockets_dict"),
        ("theirs.py", 9, "__haystack_output__"),
        ("theirs.py", 13, "def Key._to_dict"),
    ]
