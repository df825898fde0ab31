"""The project's own import graph, read from source with ``ast``, and a digest of a module's closure.

The eval result cache is keyed by the code that computes a result. A hand-kept list of files goes
stale the day a scoring module is added or split; the import closure of the arm module cannot,
because every module an arm can reach is imported from somewhere in that closure. Every import
statement counts (top level, inside a function, under ``TYPE_CHECKING``), so a module loaded lazily
is in the closure too. The same graph is what ``tests/test_import_graph.py`` checks for circles.
"""
from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterable
from pathlib import Path

PRODUCT_MODULES = ("main", "config", "pipeline")
PRODUCT_PACKAGES = ("tree_builder", "indexing", "retrieval", "utils", "evaluation", "server")
DATA_SUFFIXES = (".json",)
"""Files beside a module that it reads at run time (ranking weights, a tokenizer), digested with it."""

ROOT = Path(__file__).resolve().parent.parent


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Module name -> source file for the product's top-level modules and packages (recursively)."""
    found: dict[str, Path] = {}
    for name in PRODUCT_MODULES:
        path = root / f"{name}.py"
        if path.is_file():
            found[name] = path
    for package in PRODUCT_PACKAGES:
        base = root / package
        for path in sorted(base.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(path: Path, module: str, known: Iterable[str]) -> set[str]:
    """The product modules ``module`` imports anywhere in its source.

    ``from a.b import c`` names the module ``a.b.c`` when there is one, else ``a.b``; names outside
    the product (the standard library, third-party packages) are dropped."""
    known = set(known)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module, is_package)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                       for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != module:
                out.add(target)
    return out


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the product modules it imports (every import statement, wherever it stands)."""
    files = module_files(root)
    return {name: imports_of(path, name, files) for name, path in files.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles: strongly connected components of more than one module (Tarjan's
    algorithm, iterative), each sorted, largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
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
    return sorted(found, key=lambda c: (-len(c), c))


def import_closure(module: str, root: Path = ROOT) -> set[str]:
    """Every product module ``module`` can load, with the packages that hold them."""
    graph = import_graph(root)
    if module not in graph:
        raise KeyError(f"{module!r} is not a module of the product under {root}")
    seen = {module}
    todo = [module]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    for name in list(seen):
        parts = name.split(".")
        seen.update(".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) in graph)
    return seen


def closure_files(module: str, root: Path = ROOT) -> list[Path]:
    """The source files of ``module``'s import closure plus the data files beside them, sorted."""
    files = module_files(root)
    sources = {files[name] for name in import_closure(module, root)}
    data = {p for src in sources for p in src.parent.iterdir() if p.suffix in DATA_SUFFIXES and p.is_file()}
    return sorted(sources | data)


def closure_digest(module: str, root: Path = ROOT) -> str:
    """A digest of the code ``module`` runs: each closure file's path (relative to ``root``) and bytes."""
    h = hashlib.sha256()
    for path in closure_files(module, root):
        h.update(path.relative_to(root).as_posix().encode())
        h.update(b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:20]
