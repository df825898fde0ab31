"""Structure recovery and parsing cost of the PDF / Word / HTML / plain-text readers.

Markdown documents with known headings (the test paper and a deterministic
sample of bench documents) are rendered to PDF with and without an outline
(fpdf2; running header and page numbers on every page), to .docx
(python-docx), to HTML (with nav/script/footer chrome) and to plain text
(heading lines without ``#``). Each file is read back with the reader the
indexer uses and compared with the source:

- heading recall / precision: headings (text, whitespace and case folded)
  found vs the source's, matched as multisets;
- tree agreement: share of source sections whose (heading, tree level) the
  converted document's tree reproduces;
- throughput on the PDFs: reading time vs the time the raw encoder needs to
  embed the same chunks; the pipeline's share of the raw encoder's speed is
  embed / (read + embed) (goal >= 0.9).

``--libs`` also times the candidate PDF/HTML libraries on one rendered file
(the measurement the reader choice rests on; candidates not installed are skipped).

    python benchmarks/bench_formats.py                 # 10 qasper + 10 lecoqa docs + the test paper
    python benchmarks/bench_formats.py --per-set 3 --embedder hash --libs --ndcg-docs 20
"""
from __future__ import annotations

import hashlib
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (BENCH_DATA, TEST_PAPER, Headline, Report, base_parser, machine_info,  # noqa: E402
                               machine_line, pick, workdir_of)

FORMATS = ("pdf+outline", "pdf-layout", "docx", "html", "txt")


def sample_docs(per_set: int) -> list[Path]:
    """Evenly spaced, sorted, so every run picks the same documents."""
    out = [TEST_PAPER]
    for name in ("qasper-dev", "lecoqa-train"):
        docs = sorted((BENCH_DATA / name / "docs").rglob("*.md"))
        if docs and per_set:
            step = max(1, len(docs) // per_set)
            out += docs[::step][:per_set]
    return out


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def render(src: Any, fmt: str, path: Path, md_text: str) -> None:
    from tests.doc_factory import render_docx, render_html, render_pdf

    if fmt == "pdf+outline":
        render_pdf(src, path, outline=True, running_header=src.title[:60] or "Report")
    elif fmt == "pdf-layout":
        render_pdf(src, path, outline=False, running_header=src.title[:60] or "Report")
    elif fmt == "docx":
        render_docx(src, path)
    elif fmt == "html":
        render_html(src, path)
    else:  # plain text: every heading line kept, its '#' marks removed
        lines = []
        for b in src.blocks:
            lines += [b.text, ""]
        path.write_text("\n".join(lines), encoding="utf-8")


def compare(truth_doc: Any, doc: Any) -> dict[str, float]:
    from config import Config
    from tree_builder.markdown_headings import parse_headings
    from tree_builder.tree import build_tree

    t = Counter(_norm(h.text) for h in parse_headings(truth_doc))
    p = Counter(_norm(h.text) for h in parse_headings(doc))
    hit = sum((t & p).values())
    cfg = Config(max_depth=6)

    def sections(d: Any) -> Counter:
        root = build_tree([d], cfg, folder_mode=True)
        return Counter((_norm(n.heading), n.level) for n in root.iter_preorder() if n.kind == "section")

    ts, ps = sections(truth_doc), sections(doc)
    return {"truth": sum(t.values()), "pred": sum(p.values()), "hit": hit,
            "tree_truth": sum(ts.values()), "tree_hit": sum((ts & ps).values())}


def main(argv: list[str] | None = None) -> int:
    ap = base_parser(__doc__)
    ap.add_argument("--per-set", type=int, default=None, help="documents sampled from each bench set (quick 3, full 10)")
    ap.add_argument("--embedder", default="onnx", help="raw encoder for the throughput ratio (onnx|hash|...)")
    ap.add_argument("--libs", action="store_true", help="also time candidate PDF/HTML libraries")
    ap.add_argument("--ndcg-docs", type=int, default=0,
                    help="also compare retrieval nDCG@10 on this many qasper papers per format (0 = skip)")
    ap.add_argument("--ndcg-embedder", default="hash", help="embedder for the nDCG comparison")
    args = ap.parse_args(argv)
    args.per_set = pick(args.per_set, args.quick, 3, 10)
    from config import Config
    from indexing.embedders.factory import make_embedder
    from indexing.representation import chunk_documents
    from tests.doc_factory import source_from_markdown
    from tree_builder.documents import document_from_text
    from tree_builder.loader import load_document
    from tree_builder.tree import build_tree

    info = machine_info()
    print(machine_line(info))
    report = Report("formats", sys.argv[1:] if argv is None else list(argv), info,
                    params={"per_set": args.per_set, "embedder": args.embedder})
    work = workdir_of(args) / "formats"
    work.mkdir(parents=True, exist_ok=True)
    totals = {f: Counter() for f in FORMATS}
    read_s: Counter = Counter()
    read_cpu: Counter = Counter()
    pdf_docs: list[Any] = []
    docs = sample_docs(args.per_set)
    print(f"{len(docs)} source documents")
    for i, md_path in enumerate(docs):
        md_text = md_path.read_text(encoding="utf-8")
        truth = document_from_text(md_text, md_path.name)
        src = source_from_markdown(md_text, md_path.name)
        outs = {}
        try:
            for fmt in FORMATS:
                ext = {"pdf+outline": ".pdf", "pdf-layout": ".pdf"}.get(fmt, "." + fmt)
                # named by the source's digest: a rendering cached by an earlier run of another sample is not reused
                key = hashlib.sha256(md_text.encode("utf-8")).hexdigest()[:10]
                outs[fmt] = out = work / f"d{i:02d}-{key}-{fmt.replace('+', '_')}{ext}"
                if not out.exists():
                    render(src, fmt, out, md_text)
        except RuntimeError as exc:  # e.g. no CJK font on this machine: leave the document out of every format
            print(f"skipped {md_path.name}: {exc}")
            continue
        for fmt, out in outs.items():
            t0, c0 = time.perf_counter(), time.process_time()
            doc = load_document(out, out.name)
            read_s[fmt] += time.perf_counter() - t0
            read_cpu[fmt] += time.process_time() - c0
            totals[fmt] += Counter(compare(truth, doc))
            if fmt == "pdf-layout":
                pdf_docs.append(doc)
    print(f"\n{'format':<12} {'headings':>8} {'recall':>7} {'precision':>9} {'tree agreement':>15} {'read s':>7}")
    results: dict[str, Any] = {}
    for fmt in FORMATS:
        c = totals[fmt]
        recall = c["hit"] / c["truth"] if c["truth"] else float("nan")
        precision = c["hit"] / c["pred"] if c["pred"] else float("nan")
        tree = c["tree_hit"] / c["tree_truth"] if c["tree_truth"] else float("nan")
        results[fmt] = {"recall": recall, "precision": precision, "tree_agreement": tree,
                        "read_seconds": read_s[fmt], "headings": c["truth"]}
        print(f"{fmt:<12} {c['truth']:>8} {recall:>7.3f} {precision:>9.3f} {tree:>15.3f} {read_s[fmt]:>7.2f}")

    # Throughput: reading the PDFs vs embedding their chunks with the raw encoder.
    cfg = Config()
    chunks = []
    for d in pdf_docs:
        root = build_tree([d], cfg, folder_mode=True)
        chunks += chunk_documents(root, [d], cfg)
    embedder = make_embedder(args.embedder, cfg)
    embedder.embed_documents(["warm up"])
    t0, c0 = time.perf_counter(), time.process_time()
    embedder.embed_documents([c.text for c in chunks])
    embed_s, embed_cpu = time.perf_counter() - t0, time.process_time() - c0
    pages = sum(len(d.page_starts) for d in pdf_docs)
    print(f"\nPDF throughput ({args.embedder}): {pages} pages, {len(chunks)} chunks")
    for what, parse, embed in (("wall", read_s["pdf-layout"], embed_s), ("CPU", read_cpu["pdf-layout"], embed_cpu)):
        share = embed / (embed + parse) if embed + parse else float("nan")
        print(f"  {what:>4}: read {parse:.2f} s ({pages / parse:.0f} pages/s), embed {embed:.2f} s; "
              f"reading/embedding = {parse / embed:.3f}; read+embed runs at {share:.3f}x the raw encoder "
              f"(goal >= 0.9)")
        results[f"pdf_share_{what.lower()}"] = share
        if what == "CPU":  # CPU time: what a shared machine disturbs least
            report.headlines.append(Headline("PDF read + embed vs the raw encoder (CPU)", share, "x", "≥ 0.9",
                                             share >= 0.9, ratio=share, ratio_of="raw encoder"))
    for fmt in FORMATS:
        report.headlines.append(Headline(f"heading recall, {fmt}", results[fmt]["recall"], ""))
    report.results = results
    if args.libs:
        time_libraries(sorted(work.glob("d*-pdf-layout.pdf")), sorted(work.glob("d*-html.html")))
    if args.ndcg_docs:
        retrieval_ndcg(work / "ndcg", args.ndcg_docs, args.ndcg_embedder)
    report.finish(args.json)
    return 0


NDCG_FORMATS = {"md": ".md", "pdf-layout": ".pdf", "docx": ".docx", "html": ".html"}


def _locate_ws(text: str, needle: str) -> tuple[tuple[int, int], ...]:
    """Evidence spans, whitespace-insensitive (a PDF breaks a paragraph into lines)."""
    import re

    tokens = needle.split()
    if not tokens:
        return ()
    pattern = re.compile(r"\s+".join(re.escape(t) for t in tokens))
    return tuple((m.start(), m.end()) for m in pattern.finditer(text))


def retrieval_ndcg(work: Path, n_docs: int, embedder_name: str) -> None:
    """nDCG@10 of qasper questions on the same papers indexed as Markdown and as each converted format.

    Same pipeline (hybrid locator, no reranker), same embedder; only questions whose
    evidence can be located in every format are scored, so the means are paired.
    """
    import json

    from config import Config
    from evaluation.metrics import SpanTable, question_relevance, score_ranking
    from indexing.embedders.factory import make_embedder
    from indexing.index_builder import build_index
    from indexing.index_store import load_index
    from pipeline import Backends, run_retrieval
    from retrieval.rerankers import make_reranker
    from tests.doc_factory import render_docx, render_html, render_pdf, source_from_markdown
    from tree_builder.loader import load_input

    docs_dir = BENCH_DATA / "qasper-dev" / "docs"
    papers = sorted(docs_dir.glob("*.md"))
    papers = papers[::max(1, len(papers) // n_docs)][:n_docs]
    names = {p.name for p in papers}
    questions = []
    for line in (BENCH_DATA / "qasper-dev" / "qa.jsonl").read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        if q.get("scope") and set(q["scope"]) <= names and q.get("evidence"):
            questions.append(q)
    config = Config(reranker="none", locator="hybrid", final_top_k=10)
    embedder = make_embedder(embedder_name, config)
    per_format: dict[str, dict[str, float]] = {}
    for fmt, ext in NDCG_FORMATS.items():
        folder = work / fmt
        folder.mkdir(parents=True, exist_ok=True)
        for p in papers:
            out = folder / (p.stem + ext)
            if out.exists():
                continue
            if fmt == "md":
                out.write_text(p.read_text(encoding="utf-8"), encoding="utf-8")
                continue
            src = source_from_markdown(p.read_text(encoding="utf-8"), p.name)
            {"pdf-layout": lambda: render_pdf(src, out, outline=False, running_header=src.title[:60]),
             "docx": lambda: render_docx(src, out), "html": lambda: render_html(src, out)}[fmt]()
        build_index(folder, work / f"index-{fmt}", config, embedder, update=False)
        index = load_index(work / f"index-{fmt}")
        texts = {d.path: d.text for d in load_input(folder).documents}
        table = SpanTable.from_index(index)
        rows = {c.chunk_id: i for i, c in enumerate(index.chunks)}
        backends = Backends(embedder, make_reranker(config), None)
        scores: dict[str, float] = {}
        for q in questions:
            doc = q["scope"][0].removesuffix(".md") + ext
            evidence = [(doc, _locate_ws(texts.get(doc, ""), e["text"])) for e in q["evidence"]]
            rel = question_relevance(table, evidence, [doc])
            if not rel.scorable:
                continue
            r = run_retrieval(q["query"], index, config, backends, {doc})
            scores[q["id"]] = score_ranking([rows[rc.chunk.chunk_id] for rc in r.final], rel)["ndcg@10"]
        per_format[fmt] = scores
    common = set.intersection(*(set(s) for s in per_format.values()))
    print(f"\nretrieval nDCG@10 ({embedder_name} embedder, hybrid locator, no rerank): {len(papers)} qasper papers, "
          f"{len(common)} questions scorable in every format (of {len(questions)})")
    base = sum(per_format["md"][q] for q in common) / len(common) if common else float("nan")
    for fmt, scores in per_format.items():
        mean = sum(scores[q] for q in common) / len(common) if common else float("nan")
        print(f"  {fmt:<12} nDCG@10 {mean:.3f}  ({(mean - base) / base * 100:+.1f}% vs Markdown)")


def time_libraries(pdfs: list[Path], htmls: list[Path]) -> None:
    """CPU seconds to get text (with fonts where the library can) from every sampled PDF / HTML file.

    Best of 3 per file, summed: CPU time, because the machine is shared.
    """
    def best(fn: Any, files: list[Path]) -> float:
        total = 0.0
        for f in files:
            times = []
            for _ in range(3):
                t0 = time.process_time()
                fn(f)
                times.append(time.process_time() - t0)
            total += min(times)
        return total

    def pdfium_lines(pdf: Path) -> None:
        from tree_builder.readers.pdf_text import read_pdf_content

        read_pdf_content(pdf.read_bytes(), pdf.name)

    def pypdf_fonts(pdf: Path) -> None:
        import pypdf

        for p in pypdf.PdfReader(str(pdf)).pages:
            p.extract_text(visitor_text=lambda *a: None)

    def pdfminer_chars(pdf: Path) -> None:
        from pdfminer.converter import PDFPageAggregator
        from pdfminer.pdfdocument import PDFDocument
        from pdfminer.pdfinterp import PDFPageInterpreter, PDFResourceManager
        from pdfminer.pdfpage import PDFPage
        from pdfminer.pdfparser import PDFParser

        with open(pdf, "rb") as fh:
            rm = PDFResourceManager()
            dev = PDFPageAggregator(rm, laparams=None)
            interp = PDFPageInterpreter(rm, dev)
            for page in PDFPage.create_pages(PDFDocument(PDFParser(fh))):
                interp.process_page(page)

    def pdfplumber_chars(pdf: Path) -> None:
        import pdfplumber

        with pdfplumber.open(str(pdf)) as d:
            for p in d.pages:
                _ = p.chars

    def bs4_text(html: Path) -> None:
        from bs4 import BeautifulSoup

        BeautifulSoup(html.read_text(encoding="utf-8"), "html.parser").get_text()

    def selectolax_text(html: Path) -> None:
        from selectolax.lexbor import LexborHTMLParser

        LexborHTMLParser(html.read_text(encoding="utf-8")).body.text()

    print(f"\nlibrary CPU time over {len(pdfs)} PDFs / {len(htmls)} HTML files (best of 3 per file):")
    for name, fn, files in (("pypdfium2 (the reader's lines)", pdfium_lines, pdfs),
                            ("pypdf (text + fonts)", pypdf_fonts, pdfs),
                            ("pdfminer.six (chars, no layout)", pdfminer_chars, pdfs),
                            ("pdfplumber (chars)", pdfplumber_chars, pdfs),
                            ("beautifulsoup4 html.parser", bs4_text, htmls),
                            ("selectolax lexbor", selectolax_text, htmls)):
        try:
            print(f"  {name:<34} {best(fn, files) * 1000:8.1f} ms")
        except ImportError:
            print(f"  {name:<34} not installed")


if __name__ == "__main__":
    raise SystemExit(main())
