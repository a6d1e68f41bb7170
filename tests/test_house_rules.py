"""The shape of the house, checked (docs/architecture.md): small rooms, public seams.

- No module over 500 lines of code (docstrings, comments and blank lines not counted),
  except the generated sync twins, whose size is their source's.
- No function over 80 lines.
- No private attribute of another object reached from outside its own module: ``obj._x``
  is allowed on ``self``/``cls``, for names the same module defines, and for the public
  API that happens to start with an underscore (namedtuple's ``_replace`` and kin,
  ``os._exit``).
- A private module's ``__all__`` is its interface: every name another module of the
  package imports from it is listed there.
- Under tests/: no module imports from a test module or a conftest, nor an underscore name
  of another module; what tests share lives in support modules under public names.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "tenure"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80
UNDERSCORE_API = {"_replace", "_make", "_asdict", "_fields", "_field_defaults", "_exit"}


def _generated() -> set[Path]:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "async_to_sync", PACKAGE.parent.parent / "tools" / "async_to_sync.py"
    )
    assert spec is not None
    assert spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return {PACKAGE / target for _, target in tool.pairs()}


MODULES = sorted(PACKAGE.rglob("*.py"))
GENERATED = _generated()


def _docstring_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def lines_of_code(text: str) -> int:
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type not in skip and token.type != tokenize.ENDMARKER:
            lines.update(range(token.start[0], token.end[0] + 1))
    return len(lines - _docstring_lines(ast.parse(text)))


def _name(path: Path) -> str:
    return str(path.relative_to(PACKAGE))


@pytest.mark.parametrize("path", [m for m in MODULES if m not in GENERATED], ids=_name)
def test_rooms_are_small(path: Path) -> None:
    text = path.read_text()
    size = lines_of_code(text)
    assert size <= MAX_MODULE_LINES, f"{_name(path)}: {size} lines of code; split it by concern"
    long = [
        f"{node.name} ({(node.end_lineno or 0) - node.lineno + 1} lines)"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and (node.end_lineno or 0) - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long, f"{_name(path)}: functions over {MAX_FUNCTION_LINES} lines: {long}"


def _defined_private_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {name for name in names if name.startswith("_")}


def test_no_private_attribute_is_reached_from_another_module() -> None:
    reached = []
    for path in MODULES:
        tree = ast.parse(path.read_text())
        own = _defined_private_names(tree) | UNDERSCORE_API
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
                continue
            if node.attr.startswith("__") or node.attr in own:
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            reached.append(f"{_name(path)}:{node.lineno}: {ast.unparse(node)}")
    assert not reached, "use a public seam instead:\n" + "\n".join(reached)


def _module_of(path: Path, root: Path = PACKAGE) -> str:
    """The dotted name of the module at ``path`` in the package or folder ``root``."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(importer: Path, node: ast.ImportFrom, root: Path = PACKAGE) -> str:
    """The absolute name of the module a ``from ... import`` names."""
    if not node.level:
        return node.module or ""
    package = _module_of(importer, root).split(".")
    if importer.name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def test_a_private_modules_all_lists_what_the_package_imports_from_it() -> None:
    exported: dict[str, set[str] | None] = {}
    for path in MODULES:
        tree = ast.parse(path.read_text())
        names = None
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                names = set(ast.literal_eval(node.value))
        exported[_module_of(path)] = names
    missing: dict[str, set[str]] = defaultdict(set)
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            source = _resolve(path, node)
            if not source.rpartition(".")[2].startswith("_") or source not in exported:
                continue
            listed = exported[source]
            for alias in node.names:
                if listed is not None and alias.name not in listed:
                    missing[source].add(alias.name)
    assert not missing, "add these to the module's __all__ (or stop importing them):\n" + (
        "\n".join(f"{m}: {sorted(n)}" for m, n in sorted(missing.items()))
    )


# The floors of docs/architecture.md, bottom up: a module imports only from its own floor
# or the floors below (imports inside functions included; `tenure/__init__.py` and
# `__main__` sit on top of everything).
FLOORS: list[tuple[str, ...]] = [
    (
        "tenure.models",
        "tenure.errors",
        "tenure._validate",
        "tenure._clock",
        "tenure._concurrency",
        "tenure._resources",
        "tenure._sqlite",
        "tenure._queue_stats",
        "tenure._schedule",
        "tenure._seams",
        "tenure._trace_context",
    ),
    ("tenure._protocol", "tenure._snapshots", "tenure._batches"),
    ("tenure.stores", "tenure._dbapi"),
    (
        "tenure._store",
        "tenure._store_async",
        "tenure._store_jobs",
        "tenure._store_jobs_async",
        "tenure._store_control",
        "tenure._store_control_async",
        "tenure._store_locks",
        "tenure._store_locks_async",
        "tenure._store_schedules",
        "tenure._store_schedules_async",
        "tenure.aio",
    ),
    ("tenure.worker", "tenure.fence", "tenure.locks"),
    ("tenure.chaos", "tenure.dashboard"),
    ("tenure.cli",),
]


def _floor(module: str) -> int | None:
    for level, rooms in enumerate(FLOORS):
        if any(module == room or module.startswith(room + ".") for room in rooms):
            return level
    return None


def test_imports_only_go_down_the_floors() -> None:
    upward = []
    for path in MODULES:
        importer = _module_of(path)
        level = _floor(importer)
        if level is None:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                source = _resolve(path, node)
                targets = (
                    [source]
                    if source != "tenure"
                    else [f"tenure.{alias.name}" for alias in node.names]
                )
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            for target in targets:
                if not target.startswith("tenure"):
                    continue
                above = _floor(target)
                if above is not None and above > level:
                    upward.append(f"{importer} (floor {level}) imports {target} (floor {above})")
    assert not upward, "\n".join(sorted(set(upward)))


def test_every_module_has_a_floor() -> None:
    homeless = [
        _module_of(path)
        for path in MODULES
        if _floor(_module_of(path)) is None
        and _module_of(path) not in ("tenure", "tenure.__main__")
    ]
    assert not homeless, f"add these to FLOORS (and docs/architecture.md): {homeless}"


def test_no_private_module_of_another_package_is_imported() -> None:
    # A package's private modules are its own and its sub-packages'; what others need it
    # exports from its __init__ (or tenure.stores.abc). Top-level tenure._x modules are the
    # shared floor of everything.
    reached = []
    for path in MODULES:
        importer = _module_of(path)
        package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            source = _resolve(path, node)
            home, _, name = source.rpartition(".")
            if not source.startswith("tenure.") or not name.startswith("_") or home == "tenure":
                continue
            if package == home or package.startswith(home + "."):
                continue
            reached.append(f"{importer} imports {source}")
    assert not reached, "import from the package instead:\n" + "\n".join(sorted(set(reached)))


# -- the tests' own house --------------------------------------------------------------------
# A test module is no library: what two test modules share lives in a support module
# (tests/backends.py, tests/<dir>/_support.py, ...) under a public name, and fixtures live in
# a conftest, which pytest finds by itself. So no module under tests/ imports from a test
# module or from a conftest, nor an underscore name of another module of tests/.

TESTS = PACKAGE.parent.parent / "tests"


def _tests_imports(root: Path, path: Path) -> list[tuple[int, str, str | None]]:
    """(line, module, imported name or None) of each import of a module under tests/."""
    found: list[tuple[int, str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(path, node, root)
            found += [(node.lineno, source, alias.name) for alias in node.names]
    return [item for item in found if item[1] == "tests" or item[1].startswith("tests.")]


def borrowed_test_internals(root: Path) -> list[str]:
    """Every import, under ``root`` (a tests/ directory), of a test module, a conftest, or
    an underscore name of another module."""
    found = []
    for path in sorted(root.rglob("*.py")):
        where = f"{path.relative_to(root.parent)}"
        for line, module, name in _tests_imports(root, path):
            target = module if name is None else f"{module}.{name}"
            submodule = name is not None and (
                (root.parent / target.replace(".", "/")).with_suffix(".py").exists()
                or (root.parent / target.replace(".", "/") / "__init__.py").exists()
            )
            modules = [module] + ([target] if submodule else [])
            leaves = [m.rpartition(".")[2] for m in modules]
            what = target if submodule or name is None else f"{name} from {module}"
            if any(leaf.startswith("test_") for leaf in leaves):
                found.append(f"{where}:{line}: imports a test module: {what}")
            elif "conftest" in leaves:
                found.append(f"{where}:{line}: imports a conftest: {what}")
            elif name is not None and name.startswith("_") and not submodule:
                found.append(f"{where}:{line}: imports the private {name} of {module}")
    return found


def test_tests_borrow_nothing_from_other_tests() -> None:
    borrowed = borrowed_test_internals(TESTS)
    assert not borrowed, (
        "move what is shared to a support module (tests/<dir>/_support.py, tests/backends.py)"
        " under a public name; fixtures to a conftest:\n" + "\n".join(borrowed)
    )


def test_the_borrowing_check_can_fail(tmp_path: Path) -> None:
    root = tmp_path / "tests"
    (root / "pkg").mkdir(parents=True)
    for name in ("__init__", "pkg/__init__", "pkg/_support", "pkg/conftest", "pkg/test_a"):
        (root / f"{name}.py").write_text("")
    (root / "pkg" / "test_b.py").write_text(
        "from tests.pkg.test_a import helper\n"
        "from tests.pkg import test_a\n"
        "import tests.pkg.test_a\n"
        "from tests.pkg.conftest import fixture_helper\n"
        "from .conftest import other\n"
        "from tests.pkg._support import _private\n"
        "from tests.pkg._support import public\n"
        "from tests.pkg import _support\n"
    )
    assert [line.partition(": ")[2] for line in borrowed_test_internals(root)] == [
        "imports a test module: helper from tests.pkg.test_a",
        "imports a test module: tests.pkg.test_a",
        "imports a test module: tests.pkg.test_a",
        "imports a conftest: fixture_helper from tests.pkg.conftest",
        "imports a conftest: other from tests.pkg.conftest",
        "imports the private _private of tests.pkg._support",
    ]
