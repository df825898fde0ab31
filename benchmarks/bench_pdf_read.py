"""Reading cost of real PDFs: the reader's PDFium layer against pypdf's text visitor, in one run.

    python benchmarks/bench_pdf_read.py --docs DIR [--limit N]

For each PDF of DIR (name order, the first N): CPU seconds of ``read_pdf_content`` (every page's
lines with their styles, the outline and the title: what the reader gets from PDFium) and of
pypdf's text visitor over every page (the extraction the reader was built on before PDFium;
pypdf is in requirements-dev.txt). CPU time, because the machine is shared; one run each, since
a long filing's read is long enough to measure.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import io  # noqa: E402
import logging  # noqa: E402

import pypdf  # noqa: E402  # both libraries loaded before any timing: no file pays for an import
import pypdfium2  # noqa: E402,F401

from tree_builder.readers.pdf_text import read_pdf_content  # noqa: E402


def _pdfium(data: bytes, name: str) -> int:
    return len(read_pdf_content(data, name).pages)


def _pypdf(data: bytes, _name: str) -> int:
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    pages = pypdf.PdfReader(io.BytesIO(data)).pages
    for page in pages:
        page.extract_text(visitor_text=lambda *_a: None)
    return len(pages)


def _cpu(fn, data: bytes, name: str) -> tuple[int, float]:  # type: ignore[no-untyped-def]
    t0 = time.process_time()
    pages = fn(data, name)
    return pages, time.process_time() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=Path, required=True, help="a folder of PDFs")
    ap.add_argument("--limit", type=int, default=None, help="the first N PDFs (name order)")
    args = ap.parse_args(argv)
    if not args.docs.is_dir():
        print(f"error: {args.docs}: not a folder", file=sys.stderr)
        return 2
    files = sorted(p for p in args.docs.iterdir() if p.suffix.lower() == ".pdf")[: args.limit]
    if not files:
        print(f"error: no PDF in {args.docs}", file=sys.stderr)
        return 2
    print("| file | pages | PDFium CPU s | pages per CPU-s | pypdf CPU s | pages per CPU-s | pypdf / PDFium |")
    print("|---|---|---|---|---|---|---|")
    totals = [0, 0.0, 0.0]
    for f in files:
        data = f.read_bytes()
        pages, t_pdfium = _cpu(_pdfium, data, f.name)
        _, t_pypdf = _cpu(_pypdf, data, f.name)
        totals[0] += pages
        totals[1] += t_pdfium
        totals[2] += t_pypdf
        print(f"| {f.name} | {pages} | {t_pdfium:.2f} | {pages / t_pdfium:.1f} | {t_pypdf:.2f} | "
              f"{pages / t_pypdf:.1f} | {t_pypdf / t_pdfium:.1f}x |", flush=True)
    pages, t_pdfium, t_pypdf = totals
    print(f"| all | {pages} | {t_pdfium:.2f} | {pages / t_pdfium:.1f} | {t_pypdf:.2f} | "
          f"{pages / t_pypdf:.1f} | {t_pypdf / t_pdfium:.1f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
