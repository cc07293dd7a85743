"""The layer rules of docs/architecture.md, checked on the import graph (lazy imports included).

Every ``import`` and ``from ... import`` anywhere in a module counts, inside
functions too, and so does a module named in a string handed to
``importlib.import_module`` (the lazy exports of ``dmlprof.backends`` and
``dmlprof.sweep``): an import hidden in a function is still a dependency.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "dmlprof"

# Lowest first. A module may import its own layer and the layers below it, never one above.
LAYERS = (
    ("foundation", ("dmlprof.version", "dmlprof.errors", "dmlprof.units", "dmlprof.plain", "dmlprof.schema",
                    "dmlprof.meta", "dmlprof.facts", "dmlprof.tables", "dmlprof.files", "dmlprof.session_check",
                    "dmlprof.interrupts", "dmlprof.progress")),
    ("data", ("dmlprof.session",)),
    ("analysis", ("dmlprof.analysis",)),
    ("library", ("dmlprof.replacements",)),
    ("report", ("dmlprof.report",)),
    ("render", ("dmlprof.render",)),
    ("capture", ("dmlprof.directml", "dmlprof.targets", "dmlprof.backends", "dmlprof.record", "dmlprof.verify", "dmlprof.testing")),
    ("orchestration", ("dmlprof.model_file", "dmlprof.runner", "dmlprof.replaced_scan", "dmlprof.predict",
                       "dmlprof.sweep", "dmlprof.doctor", "dmlprof.distributed", "dmlprof.job", "dmlprof.output",
                       "dmlprof.survival", "dmlprof.salvage", "dmlprof.confirm")),
    ("interface", ("dmlprof.cli", "dmlprof.__main__", "dmlprof")),
)
# Narrower rules on top of the order.
FORBIDDEN = {
    # renderers format the Report: they compute nothing and run nothing
    "dmlprof.render": ("dmlprof.analysis", "dmlprof.replacements", "dmlprof.runner", "dmlprof.record",
                       "dmlprof.verify", "dmlprof.backends"),
    # the report attaches fixes from the torch-free catalog, never the replacements themselves
    "dmlprof.report": ("dmlprof.replacements.ops", "dmlprof.replacements.fft", "dmlprof.replacements.patching"),
    # the replacements are a leaf library: only the foundation below them
    "dmlprof.replacements": ("dmlprof.session", "dmlprof.analysis"),
    # the analysis is pure: it knows the schema, not the session file or the catalog
    "dmlprof.analysis": ("dmlprof.session", "dmlprof.meta", "dmlprof.replacements"),
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _resolve(name: str):
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str, path: Path) -> set:
    """The dmlprof modules ``module`` imports anywhere in its body (the top package included)."""
    return _imports_in(module, path.read_text(encoding="utf-8"), is_package=path.name == "__init__.py")


def _imports_in(module: str, source: str, is_package: bool = False) -> set:
    tree = ast.parse(source)
    found = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = module if is_package else module.rpartition(".")[0]
            for _ in range(max(node.level - 1, 0)):
                base = base.rpartition(".")[0]
            target = (f"{base}.{node.module}" if node.module else base) if node.level else node.module or ""
            # ``from package import submodule`` needs the submodule; ``from package import name`` the package
            names = [f"{target}.{alias.name}" if f"{target}.{alias.name}" in MODULES else target for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in MODULES \
                and node.value.startswith("dmlprof."):
            names = [node.value]  # a module named for importlib.import_module
        for name in names:
            resolved = _resolve(name) if name.startswith("dmlprof") else None
            # A package of the module's own room is its own layer (and Python's package/submodule cycle);
            # the top package is not: it is the public API, the interface, and `from dmlprof import
            # __version__` in a low room is an upward import like any other.
            if resolved and resolved != module and (resolved == "dmlprof" or not module.startswith(resolved + ".")):
                found.add(resolved)
    return found


GRAPH = {module: _imports(module, path) for module, path in MODULES.items()}


def _layer(module: str) -> int:
    best = None
    for rank, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (rank, len(prefix))
    assert best is not None, f"{module} is in no layer: add it to LAYERS and docs/architecture.md"
    return best[0]


def _cycles(graph: dict) -> list:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_graph_sees_lazy_imports():
    # function-level imports and import_module strings are edges too, or the rules below prove nothing
    assert "dmlprof.runner" in GRAPH["dmlprof.cli.scan"]  # imported inside run()
    assert "dmlprof.backends.cpu" in GRAPH["dmlprof.backends"]  # named for import_module
    assert "dmlprof.render.notebook" in GRAPH["dmlprof"]


def test_an_import_of_the_top_package_from_below_is_an_edge():
    # `from dmlprof import __version__` runs the public API (the interface): the layer rules must see it,
    # while `from dmlprof import progress` needs only the submodule
    source = "from dmlprof import __version__\nfrom dmlprof import progress\nX = 'dmlprof.patch(model)'\n"
    assert _imports_in("dmlprof.meta", source) == {"dmlprof", "dmlprof.progress"}
    assert "dmlprof" not in GRAPH["dmlprof.meta"]  # the version comes from dmlprof.version, below


def test_no_import_cycles():
    assert _cycles(GRAPH) == []


def _room(module: str) -> str:
    """A module's room: the first level under dmlprof (a subpackage, or a top-level module)."""
    return ".".join(module.split(".")[:2])


def test_each_room_sits_in_one_layer_whole():
    # a layer lists rooms, never a module inside one: the folders are the layers
    assert [prefix for _, prefixes in LAYERS for prefix in prefixes if prefix.count(".") > 1] == []


def test_no_import_cycles_between_rooms():
    """The folders are the layers: no two rooms import each other, however indirectly."""
    rooms: dict = {}
    for module, targets in GRAPH.items():
        if module == "dmlprof":
            continue  # the public API is the package itself, above every room
        rooms.setdefault(_room(module), set()).update(_room(t) for t in targets if _room(t) != _room(module))
    for room in list(rooms.values()):
        for target in room:
            rooms.setdefault(target, set())
    assert _cycles(rooms) == []


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_module_imports_only_its_layer_and_below():
    upward = [f"{m} ({LAYERS[_layer(m)][0]}) imports {t} ({LAYERS[_layer(t)][0]})"
              for m, targets in GRAPH.items() for t in targets if _layer(t) > _layer(m)]
    assert upward == []


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_narrower_rules(package):
    broken = [f"{m} imports {t}" for m, targets in GRAPH.items() if m == package or m.startswith(package + ".")
              for t in targets for banned in FORBIDDEN[package] if t == banned or t.startswith(banned + ".")]
    assert broken == []


def test_the_session_imports_no_renderer_and_nothing_above_the_foundation():
    assert {t for t in GRAPH["dmlprof.session"] if _layer(t) > 0} == set()


def _imports_torch(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "torch" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "torch":
            return True
    return False


def test_the_foundation_report_renderers_and_cli_never_import_torch():
    # (what they import from dmlprof is covered by the layers; the CLI test checks sys.modules for real)
    packages = ("dmlprof.version", "dmlprof.errors", "dmlprof.units", "dmlprof.plain", "dmlprof.schema",
                "dmlprof.meta", "dmlprof.facts", "dmlprof.session", "dmlprof.analysis", "dmlprof.report",
                "dmlprof.render", "dmlprof.cli", "dmlprof.output")
    modules = {"dmlprof", "dmlprof.replacements", "dmlprof.replacements.catalog", "dmlprof.backends"}
    offenders = [m for m, path in MODULES.items()
                 if (m in modules or m.startswith(tuple(p + "." for p in packages)) or m in packages)
                 and _imports_torch(path)]
    assert offenders == []


# -- the renderers are formatting, and small ------------------------------------------------------
def cyclomatic(function: ast.AST) -> int:
    """McCabe complexity as radon counts it: 1 + decisions (if/elif, loops, except, boolean operators,
    conditional expressions, comprehension loops and filters); nested functions not included."""
    count = 1
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.IfExp, ast.ExceptHandler, ast.Assert)):
            count += 1
        elif isinstance(node, ast.BoolOp):
            count += len(node.values) - 1
        elif isinstance(node, ast.comprehension):
            count += 1 + len(node.ifs)
        stack.extend(ast.iter_child_nodes(node))
    return count


def _functions(path: Path) -> dict:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}


def test_the_complexity_measure_counts_decisions():
    source = "def f(x):\n    if x and x > 1:\n        return [y for y in x if y]\n    return 1 if x else 2\n"
    assert cyclomatic(ast.parse(source).body[0]) == 1 + 1 + 1 + 2 + 1


@pytest.mark.parametrize("name", ["render_text", "render_sweep_text"])
def test_terminal_entry_points_are_small(name):
    function = _functions(PACKAGE / "render" / "terminal.py")[name]
    assert function.end_lineno - function.lineno + 1 < 40
    assert cyclomatic(function) < 10


def test_every_report_formatter_stays_simple():
    # (render/trace.py lays out the op timeline, call by call, in one inlined hot loop: not a report formatter)
    formatters = [path for path in sorted((PACKAGE / "render").glob("*.py")) if path.name != "trace.py"]
    # the sentences every format shows are composed in the report: as simple as the formatters that show them
    formatters += [PACKAGE / "report" / name for name in ("verdict.py", "run.py")]
    complex_ = {f"{path.name}:{name} ({cyclomatic(fn)})" for path in formatters
                for name, fn in _functions(path).items() if cyclomatic(fn) >= 10}
    assert complex_ == set()


#: a run fact read or written by its name as a string: ``meta.get("steps")``, ``meta["backend"]``,
#: ``facts["notes"]``, ``session.meta.get(...)`` (issue 35: one vocabulary, typed from producer to file)
RUN_FACT_BY_NAME = re.compile(r"""\b(?:meta|facts)(?:\.get\(\s*['"]|\[\s*['"])|\.meta(?:\.get\(|\[)""")
#: the file's edge, where the flat names of format 1 and the JSON report live: the reader and writer
RUN_FACT_FILE_EDGE = ("meta.py",)


def test_the_run_fact_pattern_finds_string_access():
    found = [line for line in ('meta.get("steps")', "meta['backend']", 'facts["notes"] = 1', "session.meta.get(key)",
                               "run.meta[k]", "meta.steps", "facts.set(steps=1)", "session.meta.updated(x=1)")
             if RUN_FACT_BY_NAME.search(line)]
    assert found == ['meta.get("steps")', "meta['backend']", 'facts["notes"] = 1', "session.meta.get(key)", "run.meta[k]"]


def test_run_facts_are_read_and_written_typed_outside_the_file_reader_and_writer():
    # producers set RunMeta's fields (RunFacts), readers read them (RunMeta): no key a typo could miss
    offenders = [f"{path.relative_to(PACKAGE).as_posix()}:{n}" for path in sorted(PACKAGE.rglob("*.py"))
                 if path.relative_to(PACKAGE).as_posix() not in RUN_FACT_FILE_EDGE
                 for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                 if RUN_FACT_BY_NAME.search(line)]
    assert offenders == []


#: the most lines a module of dmlprof may hold: past it, a module is doing more than one thing (issue 24)
MODULE_LINES_MAX = 800


def test_no_module_is_longer_than_one_thing_needs():
    lengths = {path.relative_to(PACKAGE).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
               for path in PACKAGE.rglob("*.py")}
    assert lengths["runner/__init__.py"] > 0  # the runner is a package of the pieces a run is made of
    assert {name: n for name, n in lengths.items() if n > MODULE_LINES_MAX} == {}
