"""The project's import graph has no circle: not between modules, and not between rooms.

Every ``import`` counts, a function-level one too: an import moved into a function to dodge a
circle at start-up is still a circle in the design (``docs/design.md``, "Layers"). A room is a
folder of modules (``strategies/_draw/``, ``conformance/search/``); a top-level module is a room of
its own. Only ``if TYPE_CHECKING:`` imports are left out (annotations, never run).
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("strategies", "conformance", "reference_lowering", "tests", "benchmarks", "scripts")


def modules(root: pathlib.Path, packages) -> dict:
    """``{dotted name: path}`` of every module under ``packages`` (a package is its ``__init__``)."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def import_graph(root: pathlib.Path, packages) -> dict:
    """``{module: {modules it imports}}`` among the project's own modules, every import counted."""
    mods = modules(root, packages)

    def resolve(name: str) -> str | None:
        while name and name not in mods:  # ``from pkg.mod import attr``: the module holding attr
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
                continue
            base = node.module or ""
            if node.level:
                parts = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            targets.update(f"{base}.{alias.name}" for alias in node.names)
        graph[name] = {r for t in targets if (r := resolve(t)) and r != name}
    return graph


def _imports(tree):
    """Every import statement of a module, at any depth, less ``if TYPE_CHECKING:`` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child
            stack.append(child)


def circles(graph: dict) -> list:
    """The strongly connected components of ``graph`` with more than one node (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = iter(range(1 << 30))

    def visit(v):
        index[v] = low[v] = next(counter)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def rooms(graph: dict, mods: dict, root: pathlib.Path) -> dict:
    """The graph between rooms: a module's room is its folder, a top-level module its own."""
    def room(name: str) -> str:
        depth = len(mods[name].relative_to(root).parts)
        return name if depth <= 2 else ".".join(name.split(".")[:2])

    out: dict = {}
    for a, targets in graph.items():
        out.setdefault(room(a), set()).update(room(b) for b in targets if room(b) != room(a))
    return out


def _explain(components, graph) -> str:
    lines = []
    for component in components:
        inside = set(component)
        lines.append(" <-> ".join(component))
        lines += [f"    {a} imports {b}" for a in component for b in sorted(graph.get(a, ())) if b in inside]
    return "\n".join(lines)


def test_no_module_imports_itself_through_others():
    graph = import_graph(ROOT, PACKAGES)
    found = circles(graph)
    assert not found, "import circles:\n" + _explain(found, graph)


def test_rooms_import_one_way():
    """``strategies/``: base modules <- _catalog <- _build <- _draw <- _ir, _dynamic <- _graphs <-
    the package; ``conformance/``: the search imports the checker, never the other way."""
    graph = import_graph(ROOT, PACKAGES)
    between = rooms(graph, modules(ROOT, PACKAGES), ROOT)
    found = circles(between)
    assert not found, "circles between rooms:\n" + _explain(found, between)


def test_every_room_says_what_lives_there():
    """Each folder's ``__init__`` says in a paragraph what lives there."""
    inits = [path for package in PACKAGES for path in sorted((ROOT / package).rglob("__init__.py"))]
    assert len(inits) >= 15
    for init in inits:
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc.split()) >= 15, f"{init.relative_to(ROOT)}: a paragraph on what lives in the room"


@pytest.mark.parametrize("lazy", [False, True], ids=["top-level", "in-a-function"])
def test_a_planted_circle_is_found(tmp_path, lazy):
    """The check can fail: a circle through a function-level import is found and explained."""
    pkg = tmp_path / "pkg"
    (pkg / "room").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "room" / "__init__.py").write_text('"""A room."""\n')
    (pkg / "room" / "a.py").write_text("from .b import f\n")
    body = "    from .a import g\n" if lazy else ""
    (pkg / "room" / "b.py").write_text(("from . import a\n" if not lazy else "") + f"def f():\n{body}    return 1\n")
    (pkg / "c.py").write_text("from .room.a import f\n")
    graph = import_graph(tmp_path, ["pkg"])
    assert circles(graph) == [["pkg.room.a", "pkg.room.b"]]
    assert "pkg.room.b imports pkg.room.a" in _explain(circles(graph), graph)
    assert circles({"x": {"y"}, "y": set()}) == []


def test_a_planted_circle_between_rooms_is_found(tmp_path):
    """Two rooms that import each other through different modules: no module circle, a room circle."""
    pkg = tmp_path / "pkg"
    for room, text in (("low", {"a.py": "from ..high.c import h\n", "b.py": ""}),
                       ("high", {"c.py": "from ..low.b import x\n"})):
        (pkg / room).mkdir(parents=True)
        (pkg / room / "__init__.py").write_text("")
        for name, body in text.items():
            (pkg / room / name).write_text(body)
    (pkg / "__init__.py").write_text("")
    graph = import_graph(tmp_path, ["pkg"])
    assert circles(graph) == []
    assert circles(rooms(graph, modules(tmp_path, ["pkg"]), tmp_path)) == [["pkg.high", "pkg.low"]]


def test_the_test_files_run_longest_first_exist_and_go_out_in_that_order():
    """conftest.py orders make test's files by hand (measured CPU): a renamed or removed file there
    would silently drop out of the order, so each one it names is a test file of this tree."""
    import conftest

    missing = [path for path in conftest.LONGEST_FIRST if not (ROOT / path).is_file()]
    assert not missing and len(set(conftest.LONGEST_FIRST)) == len(conftest.LONGEST_FIRST), missing
    # and xdist hands the files out in that order: by default it reorders them by their number of tests
    dist = next(line for line in (ROOT / "Makefile").read_text().splitlines() if line.startswith("DIST_TEST"))
    assert "--dist loadfile" in dist and "--no-loadscope-reorder" in dist, dist
