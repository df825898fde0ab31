"""The product's import graph has no circles, counting every import: top level, inside a function and
under ``TYPE_CHECKING``. A circle hidden behind a deferred import still ties its modules into one unit
that cannot be read, tested or moved alone."""
from __future__ import annotations

import sys
from pathlib import Path

from evaluation.code_digest import circles, import_graph, imports_of


def test_the_checker_finds_a_circle_through_a_function_level_import(tmp_path: Path) -> None:
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils" / "__init__.py").write_text("")
    (tmp_path / "utils" / "a.py").write_text("from utils.b import g\n")
    (tmp_path / "utils" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from utils import c\n")
    (tmp_path / "utils" / "c.py").write_text("def f():\n    from . import a\n")
    (tmp_path / "utils" / "d.py").write_text("import utils.a\n")
    graph = import_graph(tmp_path)
    assert graph["utils.b"] == {"utils.c"} and graph["utils.c"] == {"utils.a"} and graph["utils.d"] == {"utils.a"}
    assert circles(graph) == [["utils.a", "utils.b", "utils.c"]]


def test_product_has_no_import_circles() -> None:
    found = circles(import_graph())
    report = "\n".join(f"{len(c)} modules: {', '.join(c)}" for c in found)
    assert not found, f"{len(found)} import circle(s):\n{report}"


def test_relative_and_aliased_imports_are_resolved(tmp_path: Path) -> None:
    pkg = tmp_path / "indexing"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "x.py").write_text("from .y import thing as t\nimport indexing.z as z\n")
    known = ["indexing", "indexing.x", "indexing.y", "indexing.z"]
    assert imports_of(pkg / "x.py", "indexing.x", known) == {"indexing.y", "indexing.z"}


if __name__ == "__main__":  # `python -m tests.test_import_graph` prints the circles
    found = circles(import_graph())
    for c in found:
        print(f"{len(c)} modules: {' '.join(c)}")
    print(f"{len(found)} import circle(s)")
    sys.exit(1 if found else 0)
