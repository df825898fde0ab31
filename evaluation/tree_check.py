"""Does the section tree of each PDF in a set mirror the document? (``python -m evaluation.tree_check``)

For every annual report (a filing whose cover says "FORM 10-K"; found from its
text, never its name) four checks:

- shape: PART > Item > subsection (every Item sits under a PART, and Items have subsections);
- items: at least 15 Item nodes;
- fan-out: no node with more than 60 children;
- evidence: each labelled evidence page (``qa.jsonl``: ``doc`` and 1-based ``page``) lies in a
  leaf under an Item; a miss says why (before the first Item: cover or contents; in an exhibit, and
  which; after the Items: signatures; no Item reaches the page).

Every other PDF (quarterly reports, current reports, releases) gets its fan-out and leaf count.
Each PDF is read once, through the same reader and tree builder ``index`` uses.

``--without outline,contents`` reads each PDF as though it had no bookmarks and no contents page
that could be found: the tree the fallbacks (division words, then fonts) give. Most dev filings
have one signal or both, and an unseen filing may have neither.
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from config import Config
from tree_builder.doc_card import cover_form
from tree_builder.heading_schemes import scheme_of
from tree_builder.readers import read_document
from tree_builder.readers.limits import DEFAULT_LIMITS
from tree_builder.readers.pdf_reader import SIGNALS, read_pdf
from tree_builder.tree import TreeNode, build_tree
from utils.atomic import atomic_write_text
from utils.bounded_read import read_bounded
from utils.errors import InputError

MIN_ITEMS = 15
MAX_CHILDREN = 60


@dataclass
class Miss:
    page: int
    why: str


@dataclass
class FileCheck:
    file: str
    form: str
    pages: int
    items: int
    parts: int
    max_children: int
    leaves: int
    shape_ok: bool = False
    evidence: int = 0
    misses: list[Miss] = field(default_factory=list)
    error: str = ""

    @property
    def passes(self) -> bool:
        return (self.form == "10-K" and not self.error and self.shape_ok and self.items >= MIN_ITEMS
                and self.max_children <= MAX_CHILDREN and not self.misses)

    def failures(self) -> list[str]:
        out = []
        if self.error:
            return [self.error]
        if not self.shape_ok:
            out.append("shape")
        if self.items < MIN_ITEMS:
            out.append(f"items {self.items}")
        if self.max_children > MAX_CHILDREN:
            out.append(f"fan-out {self.max_children}")
        if self.misses:
            out.append(f"{len(self.misses)} evidence miss(es): "
                       + ", ".join(f"p{m.page} {m.why}" for m in self.misses))
        return out


def form_of(text: str, page_starts: list[int] | None = None) -> str:
    """The form the cover prints (the card's reading: "FORM 10-K" on a line of its own), or "other"."""
    return cover_form(text, page_starts) or "other"


def _kind(node: TreeNode) -> str | None:
    """The division word a section opens with ("item", "part", ...); None for intro leaves and others."""
    if node.kind != "section":
        return None
    scheme = scheme_of(node.heading)
    return scheme.name if scheme else None


def _max_children(node: TreeNode) -> int:
    return max((len(n.children) for n in node.iter_preorder()), default=0)


def _division(node: TreeNode, kind: str) -> TreeNode | None:
    """The outermost section opening with ``kind``'s word that holds ``node`` (or is it), else None."""
    return next((a for a in [*node.ancestors(), node] if _kind(a) == kind), None)


def evidence_miss(doc_node: TreeNode, page: int) -> str | None:
    """None when ``page`` lies in a leaf under an Item, else why not."""
    leaves = [n for n in doc_node.leaves() if n.page_start <= page <= n.page_end]
    if any(_division(n, "item") is not None for n in leaves):
        return None
    items = [n for n in doc_node.iter_preorder() if _kind(n) == "item"]
    if not items:
        return "no Item in the tree"
    if page < min(n.page_start for n in items):
        return "before the first Item (cover or contents)"
    exhibit = next((e for n in leaves if (e := _division(n, "exhibit")) is not None), None)
    if exhibit is not None:
        return f"in an exhibit ({exhibit.heading})"
    if page > max(n.page_end for n in items):
        return "after the last Item (exhibits, signatures)"
    return "in a section outside the Items"


def check_file(path: Path, evidence_pages: list[int], config: Config,
               without: frozenset[str] = frozenset()) -> FileCheck:
    """``without``: PDF signals to ignore (``pdf_reader.SIGNALS``): the tree of a filing that lacks them."""
    try:
        if without and path.suffix.lower() == ".pdf":
            data = read_bounded(path, limit=DEFAULT_LIMITS.max_input_bytes, what=path.name)
            doc = read_pdf(path, path.name, data, without=without)
        else:
            doc = read_document(path, path.name)
    except InputError as exc:
        return FileCheck(path.name, "?", 0, 0, 0, 0, 0, error=str(exc))
    root = build_tree([doc], config, folder_mode=True)
    doc_node = root.children[0]
    nodes = list(doc_node.iter_preorder())
    items = [n for n in nodes if _kind(n) == "item"]
    parts = [n for n in nodes if _kind(n) == "part"]
    check = FileCheck(path.name, form_of(doc.text, doc.page_starts), len(doc.page_starts), len(items), len(parts),
                      _max_children(doc_node), len(doc_node.leaves()))
    check.shape_ok = bool(items) and bool(parts) \
        and all(_division(n, "part") is not None for n in items) \
        and any(any(c.kind == "section" for c in n.children) for n in items)
    check.evidence = len(evidence_pages)
    for page in evidence_pages:
        why = evidence_miss(doc_node, page)
        if why is not None:
            check.misses.append(Miss(page, why))
    return check


def evidence_by_doc(qa_path: Path) -> dict[str, list[int]]:
    """Labelled evidence pages per document file name (``qa.jsonl``; a set without one has none)."""
    out: dict[str, list[int]] = {}
    if not qa_path.is_file():
        return out
    for line in qa_path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        for ev in json.loads(line).get("evidence", []):
            if ev.get("doc") and isinstance(ev.get("page"), int):
                out.setdefault(ev["doc"], []).append(ev["page"])
    return out


def file_line(c: FileCheck) -> str:
    """One file's verdict (printed as soon as the file is checked)."""
    if c.form == "10-K":
        verdict = "pass" if c.passes else "FAIL " + "; ".join(c.failures())
        return (f"{c.file}: 10-K, {c.pages} pages, {c.parts} PART, {c.items} Item, "
                f"max children {c.max_children}, {c.leaves} leaves, "
                f"evidence {c.evidence - len(c.misses)}/{c.evidence} -> {verdict}")
    return (f"{c.file}: {c.form}, {c.pages} pages, max children {c.max_children}, "
            f"{c.leaves} leaves, {c.items} Item" + (f" ({c.error})" if c.error else ""))


def summary_line(checks: list[FileCheck]) -> str:
    annual = [c for c in checks if c.form == "10-K"]
    passed = sum(1 for c in annual if c.passes)
    ev = sum(c.evidence for c in annual)
    missed = sum(len(c.misses) for c in annual)
    return (f"10-K passing all four checks: {passed} of {len(annual)}; "
            f"evidence pages in a leaf under an Item: {ev - missed} of {ev}; "
            f"max children over all files: {max((c.max_children for c in checks), default=0)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evaluation.tree_check", description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, type=Path, help="a set folder: docs/*.pdf and qa.jsonl")
    ap.add_argument("--files", default="*.pdf", help="glob over the file names in docs/ (default *.pdf)")
    ap.add_argument("--json", type=Path, help="write the per-file checks here as JSON")
    ap.add_argument("--without", default="", metavar="SIGNALS",
                    help=f"comma-separated PDF signals to ignore ({', '.join(SIGNALS)}): checks the "
                         "fallbacks a filing without bookmarks or a found contents page gets")
    args = ap.parse_args(argv)
    without = frozenset(filter(None, (w.strip() for w in args.without.split(","))))
    if without - set(SIGNALS):
        print(f"error: --without: unknown signal(s) {', '.join(sorted(without - set(SIGNALS)))}; "
              f"choose from {', '.join(SIGNALS)}", file=sys.stderr)
        return 2
    docs = args.data / "docs" if (args.data / "docs").is_dir() else args.data
    if not docs.is_dir():
        print(f"error: {args.data}: not a folder", file=sys.stderr)
        return 2
    files = sorted(p for p in docs.iterdir() if p.is_file() and fnmatch.fnmatch(p.name, args.files))
    if not files:
        print(f"error: no file in {docs} matches {args.files}", file=sys.stderr)
        return 2
    try:
        evidence = evidence_by_doc(args.data / "qa.jsonl")
    except (ValueError, OSError) as exc:
        print(f"error: {args.data / 'qa.jsonl'}: unreadable ({exc.__class__.__name__})", file=sys.stderr)
        return 2
    config = Config()
    checks = []
    for k, path in enumerate(files, 1):
        checks.append(check_file(path, evidence.get(path.name, []), config, without))
        print(f"[{k}/{len(files)}] {file_line(checks[-1])}", flush=True)
    print(summary_line(checks))
    if args.json:
        payload = [{**asdict(c), "passes": c.passes, "failures": c.failures()} for c in checks]
        atomic_write_text(args.json, json.dumps(payload, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
