"""How our modules depend on each other (issue 43).

* No import cycles: every import counts, those made only for type hints (under
  ``TYPE_CHECKING``) too, since they tie two modules together just the same. The graph is
  grimp's, the one import-linter builds its contracts on.
* No module reads another module's private names (``from x import _y``, ``x._y``): what a
  sibling needs is public, or it belongs in the sibling.
* No mixins: a class reads only the ``self`` attributes it or one of its bases defines
  (assigned, annotated or listed in ``__slots__``), so no class leans on attributes that a
  class in another file sets. Classes with a base from outside our packages are not
  judged (their attributes are not all visible here).
"""
from __future__ import annotations

import ast
import gc
from pathlib import Path
from typing import Iterator, Optional

import grimp

PACKAGES = ("gateway", "addressing", "translators", "pipeline")
ROOT = Path(__file__).resolve().parent.parent


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan, iteratively)."""
    modules = sorted(graph.modules)
    edges = {m: sorted(n for n in graph.find_modules_directly_imported_by(m) if n in graph.modules)
             for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0
    for root in modules:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            recurse = False
            for j in range(i, len(edges[node])):
                nxt = edges[node][j]
                if nxt not in index:
                    work.append((node, j + 1))
                    work.append((nxt, 0))
                    recurse = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if recurse:
                continue
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return groups


def test_the_finder_sees_a_cycle() -> None:
    class Graph:
        modules = {"a", "b", "c", "d"}

        @staticmethod
        def find_modules_directly_imported_by(module: str) -> set[str]:
            return {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}[module]

    assert import_cycles(Graph()) == [["a", "b", "c"]]  # type: ignore[arg-type]


def test_no_module_imports_itself_through_others() -> None:
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=False)
    cycles = import_cycles(graph)
    assert cycles == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


# ---- private names and mixins ---------------------------------------------------------

def _modules() -> dict[str, tuple[Path, ast.Module]]:
    """Every module of ours by dotted name, parsed."""
    found = {}
    # the trees are a few million objects that all live on: the cyclic collector would go
    # over them again and again while they are made (3-4 times the time of the parse)
    collecting = gc.isenabled()
    gc.disable()
    try:
        for package in PACKAGES:
            for path in sorted((ROOT / package).rglob("*.py")):
                parts = path.relative_to(ROOT).with_suffix("").parts
                name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
                found[name] = (path, ast.parse(path.read_text(), str(path)))
    finally:
        if collecting:
            gc.enable()
    return found


def _imported_from(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The module a ``from ... import`` in ``module`` (file ``path``) names."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _ours(module: str) -> bool:
    return module.split(".")[0] in PACKAGES


def private_reads(modules: dict[str, tuple[Path, ast.Module]]) -> Iterator[str]:
    """``module: what`` for each private name of another module of ours that ``module``
    imports or reads as a module attribute."""
    for module, (path, tree) in modules.items():
        aliases: dict[str, str] = {}  # local name -> a module of ours it stands for
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = _imported_from(module, path, node)
                if not _ours(source):
                    continue
                for alias in node.names:
                    name = alias.name
                    if name.startswith("_") and not name.startswith("__") and source != module:
                        yield f"{module}: from {source} import {name}"
                    if f"{source}.{name}" in modules:
                        aliases[alias.asname or name] = f"{source}.{name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if _ours(alias.name) and alias.asname:
                        aliases[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in aliases and node.attr.startswith("_")
                    and not node.attr.startswith("__")):
                yield f"{module}: {aliases[node.value.id]}.{node.attr}"


def _defined(cls: ast.ClassDef) -> set[str]:
    """The attributes ``cls`` itself defines: class-level names, ``__slots__`` and every
    ``self.x`` it assigns (not in nested classes, whose ``self`` is another)."""
    names: set[str] = set()
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for t in target.elts if isinstance(target, ast.Tuple) else [target]:
                    if isinstance(t, ast.Name):
                        names.add(t.id)
                if (isinstance(target, ast.Name) and target.id == "__slots__"
                        and isinstance(node.value, (ast.Tuple, ast.List))):
                    names.update(e.value for e in node.value.elts if isinstance(e, ast.Constant))
    for node in _own_nodes(cls):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == "self" and isinstance(node.ctx, ast.Store)):
            names.add(node.attr)
    return names


def _own_nodes(cls: ast.ClassDef) -> Iterator[ast.AST]:
    """The nodes of ``cls``'s body, not those of classes nested in it."""
    stack: list[ast.AST] = list(cls.body)
    while stack:
        node = stack.pop()
        yield node
        stack.extend(child for child in ast.iter_child_nodes(node) if not isinstance(child, ast.ClassDef))


def unowned_attributes(modules: dict[str, tuple[Path, ast.Module]]) -> Iterator[str]:
    """``module.Class: names`` for each class of ours that reads ``self`` attributes
    neither it nor its bases define."""
    classes: dict[tuple[str, str], ast.ClassDef] = {}
    imported: dict[str, dict[str, tuple[str, str]]] = {}
    for module, (path, tree) in modules.items():
        names = imported[module] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                classes.setdefault((module, node.name), node)
            elif isinstance(node, ast.ImportFrom):
                source = _imported_from(module, path, node)
                for alias in node.names:
                    names[alias.asname or alias.name] = (source, alias.name)

    def find(module: str, base: ast.expr) -> Optional[tuple[str, ast.ClassDef]]:
        if isinstance(base, ast.Subscript):
            base = base.value
        if not isinstance(base, ast.Name):
            return None
        if (module, base.id) in classes:
            return module, classes[(module, base.id)]
        source, name = imported[module].get(base.id, ("", ""))
        for candidate in (source, *(m for m in modules if m.startswith(source + "."))):
            if (candidate, name) in classes:
                return candidate, classes[(candidate, name)]
        return None

    known: dict[int, Optional[set[str]]] = {}

    def attributes(module: str, cls: ast.ClassDef) -> Optional[set[str]]:
        """What ``cls`` and its bases define; None if a base is not ours (worked out once
        per class: a base is asked for by each of its subclasses)."""
        if id(cls) not in known:
            known[id(cls)] = _attributes(module, cls)
        return known[id(cls)]

    def _attributes(module: str, cls: ast.ClassDef) -> Optional[set[str]]:
        names = _defined(cls)
        for base in cls.bases:
            if isinstance(base, ast.Name) and base.id in ("object", "Generic"):
                continue
            found = find(module, base)
            if found is None:
                return None
            inherited = attributes(*found)
            if inherited is None:
                return None
            names |= inherited
        return names

    for (module, name), cls in sorted(classes.items(), key=lambda item: item[0]):
        defined = attributes(module, cls)
        if defined is None:
            continue
        read = {node.attr for node in _own_nodes(cls)
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == "self" and not node.attr.startswith("__")}
        missing = sorted(read - defined)
        if missing:
            yield f"{module}.{name}: {', '.join(missing)}"


def test_the_checks_see_a_private_read_and_a_mixin() -> None:
    sources = {
        "gateway.a": "_hidden = 1\nclass Base:\n    def size(self):\n        return self.items\n",
        "gateway.b": "from gateway.a import _hidden, Base\nfrom gateway import a\nx = a._hidden\n"
                     "class Whole(Base):\n    def __init__(self):\n        self.items = []\n",
    }
    modules = {name: (ROOT / (name.replace(".", "/") + ".py"), ast.parse(text)) for name, text in sources.items()}
    assert sorted(private_reads(modules)) == ["gateway.b: from gateway.a import _hidden",
                                              "gateway.b: gateway.a._hidden"]
    assert list(unowned_attributes(modules)) == ["gateway.a.Base: items"]


def test_no_module_reads_a_private_name_of_another() -> None:
    found = sorted(set(private_reads(_modules())))
    assert found == [], "private names read across modules:\n" + "\n".join(found)


def test_no_class_reads_attributes_another_class_sets() -> None:
    found = list(unowned_attributes(_modules()))
    assert found == [], "attributes read but defined by no class of the reader's:\n" + "\n".join(found)
