"""Cut an evaluation set down to a reproducible sample and only the documents it asks about.

Arms that call a CPU-served LLM cost a minute or more per question, so they are
measured on a sample. The sample is the one `main.py eval --limit N --seed S` picks
(the same seeded permutation), written as a set of its own (`docs/` + `qa.jsonl`)
so its index holds only the sampled questions' documents and builds in a minute
instead of ten. Every arm of a run on the cut set sees the same, smaller index,
so arms stay comparable with each other (not with full-set figures: a corpus-wide
statistic such as the locator's IDF is computed over fewer documents).

    python -m evaluation.tools.sample_eval_set --data ../shared/bench/qasper-dev --limit 24 --out /tmp/qasper24
"""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from evaluation.dataset import DOCS_DIR, QA_FILE, load_eval_set, sample_questions  # noqa: E402
from utils.errors import InputError  # noqa: E402


def _cached_reader() -> Callable[[Path], tuple[list, list[str]]]:
    """The evaluation cache's documents (a set of long PDFs is read once, not per tool)."""
    from config import Config
    from evaluation.doc_cache import document_cache
    from evaluation.eval_index import default_cache_root
    from tree_builder.readers.limits import ReadLimits

    return document_cache(default_cache_root(), ReadLimits.from_config(Config())).read


def cut(data: Path, limit: int, seed: int, out: Path) -> tuple[int, int]:
    """Write the sample to ``out``; returns (questions, documents)."""
    if out.exists():
        raise InputError(f"{out} already exists: choose a new --out")
    es = load_eval_set(data, read=_cached_reader())
    picked = sample_questions(es.questions, limit, seed)
    lines = (data / QA_FILE).read_text(encoding="utf-8-sig").splitlines()
    docs: set[str] = set()
    kept: list[str] = []
    for q in picked:
        kept.append(lines[q.line - 1])
        docs.update(q.scope if q.scope is not None else [e.doc for e in q.evidence])
        docs.update(e.doc for e in q.evidence)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / DOCS_DIR).mkdir(parents=True)
    for doc in sorted(docs):
        target = tmp / DOCS_DIR / doc
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(data / DOCS_DIR / doc, target)
    (tmp / QA_FILE).write_text("\n".join(kept) + "\n", encoding="utf-8")
    tmp.rename(out)
    return len(kept), len(docs)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, required=True, help="evaluation set folder (docs/ + qa.jsonl)")
    p.add_argument("--limit", type=int, required=True, help="questions to keep")
    p.add_argument("--seed", type=int, default=0, help="the eval --seed whose sample to keep (default 0)")
    p.add_argument("--out", type=Path, required=True, help="new folder for the cut set")
    args = p.parse_args(argv)
    try:
        n_q, n_d = cut(args.data, args.limit, args.seed, args.out)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}: {n_q} questions over {n_d} documents")
    return 0


if __name__ == "__main__":
    sys.exit(main())
