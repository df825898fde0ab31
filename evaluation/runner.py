"""Run every sampled question through every arm, resumably, and score the results.

The index is built once per (documents, build settings, embedder) and cached;
each (question, arm) result is appended to a JSONL file as soon as it exists,
keyed by the question, the arm's full config, the index's identity and the
source of the retrieval code, so an interrupted run resumes where it stopped
and a rerun recomputes nothing while any change that could alter a result
recomputes it. Scores are always recomputed from the cached rankings (cheap),
so fixing a metric never requires rerunning retrieval.
"""
from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from config import Config
from evaluation.arms import (ARM_MODULE, BASELINE, KG, LLM_ARMS, Arm, ArmContext, ArmOutput,
                             all_arm_names, make_arm, run_arm)
from evaluation.code_digest import closure_digest
from evaluation.dataset import EvalSet, Question, load_eval_set, sample_questions
from evaluation.eval_index import default_cache_root, digest, obtain_index
from evaluation.peer import PeerArm, load_peer_arms, read_peer_file
from evaluation.metrics import (BUDGETS, PAGE_BUDGETS, PAGE_KEYS, SCORE_KEYS, SLICE_KEYS, SLICES, BootstrapCI,
                                Relevance, SpanTable, Span, bootstrap_cis, context_figures, distinct_ndcg,
                                doc_at_1, latency_percentiles, leaf_scores, mean_metrics, page_figures,
                                paired_bootstrap, question_relevance, question_slices, read_context,
                                resampled_means, score_ranking)
from indexing.index_store import Index
from utils.progress import make_progress
from utils.progress import stage as progress_stage
from utils.errors import InputError, TreeRAGError
from indexing.embedders.memo import MemoQueryEmbedder
from pipeline import make_backends
from retrieval.learned_ranker import load_ranker
from utils.bounded_read import read_text_bounded

ROOT = Path(__file__).resolve().parent.parent

RESULTS_FORMAT = 1
BEST_FLAT = "best flat arm"
"""In a slice's comparison with peer arms: the slice's best flat arm for each figure."""
COV_BUDGET = BUDGETS[0]
"""cov@2k: the smallest context budget (characters) the answer step reads."""


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@dataclass
class EvalOptions:
    data: Path
    index: Path | None = None
    arms: list[str] | None = None
    """Arm names (validated by arms.parse_arms); None = all available."""
    limit: int | None = None
    seed: int = 0
    k: int = 10
    embedder: str | None = None
    """Embedder to build with (None: hash; with ``index``: the index's own)."""
    config: Config = field(default_factory=Config)
    """Base config every arm starts from (``--set``, ``--rerank`` applied)."""
    llm: Any = None
    """A real LLM client for the tree-llm arms, or None."""
    cache_root: Path | None = None
    use_cache: bool = True
    rebuild: bool = False
    resamples: int = 10_000
    rerank_pool: int = 20
    progress: bool = True
    notice: Callable[[str], None] = _stderr
    peers: list[Path] = field(default_factory=list)
    """Peer files (evaluation.peer): another system's rankings, scored beside the arms."""
    ranker_folds: Path | None = None
    """A folder of fold weights (``learn_ranker --folds-out``): each question runs with the weights
    fitted without its document's fold, so the figures are out of fold."""


@dataclass
class QuestionResult:
    question: Question
    relevance: Relevance
    outputs: dict[str, ArmOutput]
    scores: dict[str, dict[str, float | None]]
    slices: frozenset[str] = frozenset({"all"})
    """The slices (metrics.SLICES) the question belongs to."""
    peer_relevance: dict[str, Relevance] = field(default_factory=dict)
    """Peer arm -> the question's relevance against that peer's own chunks."""
    pages: tuple[tuple[str, Span], ...] = ()
    """The question's in-scope evidence pages (doc, the page's span), for page@B."""


@dataclass
class ArmSummary:
    name: str
    n: int
    means: dict[str, float | None]
    p50_ms: float | None
    p95_ms: float | None
    fallbacks: int
    """Questions on which the arm took a recorded fallback (e.g. rerank failed)."""
    vs_baseline: BootstrapCI | None = None
    """nDCG@10 against the run's best flat arm (the baseline; None for the baseline itself)."""
    vs_baseline_cov: BootstrapCI | None = None
    """cov@2k against the same baseline."""
    baseline: str | None = None


@dataclass
class SliceSummary:
    """Every arm's figures over one slice of the questions, each held to that slice's best flat arm.

    The best flat arm is chosen per figure and per slice: a tree arm is compared
    with the strongest flat competitor on exactly what is being measured, not
    with the arm that happened to win nDCG@10 over all questions.
    """

    name: str
    n: int
    """Questions in the slice (every figure of SLICE_KEYS is defined on each)."""
    means: dict[str, dict[str, float | None]] = field(default_factory=dict)
    """arm -> figure (SCORE_KEYS) -> mean over the slice's questions."""
    baseline: dict[str, str] = field(default_factory=dict)
    """figure (SLICE_KEYS) -> the flat arm with the highest mean in this slice."""
    vs_baseline: dict[str, dict[str, BootstrapCI]] = field(default_factory=dict)
    """arm -> figure -> paired bootstrap against ``baseline[figure]`` (absent for that arm itself)."""
    peer_baseline: dict[str, str] = field(default_factory=dict)
    """figure -> the peer arm with the highest mean in this slice (when the run has peers)."""
    vs_peer: dict[str, dict[str, BootstrapCI]] = field(default_factory=dict)
    """Tree arms and ``BEST_FLAT`` -> figure -> paired bootstrap against ``peer_baseline[figure]``."""
    vs_graph: dict[str, dict[str, BootstrapCI]] = field(default_factory=dict)
    """``A+kg`` -> figure -> paired bootstrap of the arm with the graph channel against ``A`` (when both ran)."""


@dataclass
class EvalRun:
    options: EvalOptions
    eval_set: EvalSet
    arms: list[Arm]
    index: Index
    index_info: dict[str, Any]
    sampled: int
    results: list[QuestionResult]
    unscorable: list[str]
    """Sampled questions no chunk of the index can answer (not scored, for every arm)."""
    summaries: list[ArmSummary]
    computed: int
    cached: int
    seconds: float
    slices: dict[str, SliceSummary] = field(default_factory=dict)
    """Slice name (metrics.SLICES order) -> its summary; slices with no question have n == 0."""
    peers: dict[str, PeerArm] = field(default_factory=dict)
    """Peer arms of the run by name (their rows index their own chunks, not the index's)."""
    slice_keys: tuple[str, ...] = SLICE_KEYS
    """The figures of the slice tables (a set with evidence pages adds metrics.PAGE_KEYS)."""
    label_slices: dict[str, SliceSummary] = field(default_factory=dict)
    """``field=value`` of a question label (dataset.LABEL_FIELDS) -> its slice, in first-seen order."""

    @property
    def n_scored(self) -> int:
        return len(self.results)


# --------------------------------------------------------------------------- result cache

def code_fingerprint(root: Path | None = None) -> str:
    """A digest of the code an arm runs (the arm module's import closure under ``root``, by default
    this checkout); part of every result's key."""
    return closure_digest(ARM_MODULE, root or ROOT)


def arm_key(arm: Arm, opts: EvalOptions, question: Question, code: str,
            budgets: tuple[int, ...] = BUDGETS) -> str:
    llm = None
    if arm.name in LLM_ARMS and opts.llm is not None:
        llm = [getattr(opts.llm, "provider", None), getattr(opts.llm, "model", None),
               getattr(opts.llm, "base_url", None)]
    key = {"arm": arm.name, "config": arm.config.to_dict(), "k": opts.k, "code": code,
           "rerank_pool": opts.rerank_pool, "llm": llm, "query": question.query,
           "scope": question.scope, "format": RESULTS_FORMAT,
           "weights": _file_digest(arm.config.ranker_weights)}
    if tuple(budgets) != BUDGETS:  # contexts assembled at more budgets are a different result
        key["budgets"] = list(budgets)
    return digest(key)[:24]


def context_budgets(eval_set: EvalSet) -> tuple[int, ...]:
    """The budgets every arm's context is assembled at: BUDGETS, and PAGE_BUDGETS with evidence pages."""
    return tuple(sorted(set(BUDGETS) | set(PAGE_BUDGETS))) if eval_set.has_pages else BUDGETS


def _file_digest(path: str | None) -> str | None:
    """A weights file named by the config is part of a result's key: a refit rewrites the same path."""
    if path is None:
        return None
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:20]
    except OSError:
        return "<missing>"


class ResultCache:
    """Append-only JSONL of arm outputs; a torn last line (killed mid-write) is ignored."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.entries: dict[tuple[str, str, str], ArmOutput] = {}
        self._fh = None
        if path is not None and path.is_file():
            with open(path, encoding="utf-8") as fh:
                for line in fh:
                    try:
                        rec = json.loads(line)
                        self.entries[(rec["qid"], rec["arm"], rec["key"])] = ArmOutput.from_dict(rec["out"])
                    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                        continue

    def get(self, qid: str, arm: str, key: str) -> ArmOutput | None:
        return self.entries.get((qid, arm, key))

    def put(self, qid: str, arm: str, key: str, out: ArmOutput) -> None:
        self.entries[(qid, arm, key)] = out
        if self.path is None:
            return
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            torn = self.path.is_file() and self.path.stat().st_size > 0 and not self.path.read_bytes().endswith(b"\n")
            self._fh = open(self.path, "a", encoding="utf-8")
            if torn:
                self._fh.write("\n")
        self._fh.write(json.dumps({"qid": qid, "arm": arm, "key": key, "out": out.to_dict()},
                                  ensure_ascii=False) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


# --------------------------------------------------------------------------- run

def _warm_up(ctx: ArmContext, arms: list[Arm], question: Question) -> None:
    """Load models and fill lazy caches before the clock runs; refuse a reranker that cannot load.

    Every non-LLM arm answers one question untimed and unrecorded, so the first
    timed question of an arm does not pay for model loading or BM25 scope
    statistics. ``rerank`` degrades recorded-but-quietly to the fused order;
    in an evaluation that would turn "rerank on" into "rerank off" unnoticed.
    """
    ctx.backends.embedder.embed_query("warm up")
    rr = ctx.backends.reranker
    if rr is not None:
        try:
            rr.score("warm up", ["warm up"])
        except Exception as exc:  # noqa: BLE001 - any load failure is the user's setup
            msg = (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
            raise TreeRAGError(f"reranker {rr.model!r} cannot be loaded: {msg[:200]}") from None
    doc_paths = set(question.scope) if question.scope else None
    for arm in arms:
        if arm.name not in LLM_ARMS:
            run_arm(arm, ctx, question.query, doc_paths)


def context_passages(out: ArmOutput, budget: int, index: Index) -> list[tuple[str, Span]]:
    """The passages the answer step reads at ``budget``, in reading order (not yet cut).

    An arm that recorded no context at this budget (no context step, or a result
    cached before contexts existed) is read as its ranked chunks in rank order.
    """
    contexts = getattr(out, "contexts", None) or {}
    given = contexts.get(str(budget))
    if given is None:
        return [(c.doc_path, (c.start_char, c.end_char)) for c in (index.chunks[r] for r in out.rows)]
    return [(str(doc), (int(start), int(end))) for doc, start, end in given]


def read_passages(out: ArmOutput, budget: int, index: Index) -> list[tuple[str, Span]]:
    """The passages as actually read within ``budget`` (the last one cut where it ran out)."""
    return read_context(context_passages(out, budget, index), budget).passages


def evidence_pages(q: Question) -> tuple[tuple[str, Span], ...]:
    """The question's evidence pages in its scope (doc, page span), each once."""
    return tuple(dict.fromkeys((e.doc, e.page_span) for e in q.evidence
                               if e.page_span is not None and (not q.scope or e.doc in q.scope)))


def _score(arm: Arm, out: ArmOutput, rel: Relevance, index: Index, pages: tuple[tuple[str, Span], ...] = (),
           top_doc: str | None = None) -> dict[str, float | None]:
    """Every figure of one arm on one question; ``top_doc``: the document of its top-ranked chunk."""
    s: dict[str, float | None] = dict(score_ranking(out.rows, rel))
    s["dndcg@10"] = distinct_ndcg(out.rows, rel)
    for budget in BUDGETS:
        s.update(context_figures(context_passages(out, budget, index), rel, budget))
    s.update(page_figures({b: context_passages(out, b, index) if pages else [] for b in PAGE_BUDGETS}, pages))
    s["doc@1"] = doc_at_1(top_doc, (doc for doc, _ in rel.evidence_spans))
    if arm.is_tree:
        s["leaf_recall"], s["leaf_precision"] = leaf_scores(out.located_ids, rel.gold_leaves)
    else:
        s["leaf_recall"] = s["leaf_precision"] = None
    return s


def best_flat_arm(arms: list[Arm], results: list[QuestionResult]) -> str | None:
    """The flat arm with the highest mean nDCG@10 in this run: the baseline every arm is held to."""
    flat = [a.name for a in arms if a.kind == "flat"]
    if not flat or not results:
        return None
    return max(flat, key=lambda n: (float(np.mean([r.scores[n]["ndcg@10"] for r in results])),
                                    n == BASELINE))


def summarize(arms: list[Arm], results: list[QuestionResult], resamples: int,
              seed: int) -> list[ArmSummary]:
    out: list[ArmSummary] = []
    baseline = best_flat_arm(arms, results)
    for arm in arms:
        per_q = [r.scores[arm.name] for r in results]
        p50, p95 = latency_percentiles([r.outputs[arm.name].latency_ms for r in results])
        fb = sum(1 for r in results if r.outputs[arm.name].fallbacks)
        summary = ArmSummary(arm.name, len(per_q), mean_metrics(per_q, SCORE_KEYS), p50, p95, fb,
                             baseline=baseline)
        if baseline is not None and arm.name != baseline:
            for key, attr in (("ndcg@10", "vs_baseline"), ("cov@2k", "vs_baseline_cov")):
                setattr(summary, attr, paired_bootstrap(
                    [q[key] for q in per_q], [r.scores[baseline][key] for r in results],
                    resamples=resamples, seed=seed))
        out.append(summary)
    return out


def _best_of(group: list[int], names: list[str], means: np.ndarray) -> int:
    """Index of the group's arm with the highest mean (ties: the named baseline, then arm order)."""
    return max(group, key=lambda a: (float(means[a]), names[a] == BASELINE, -a))


def _against_best(group: list[int], others: list[int], names: list[str], values: np.ndarray,
                  boot: np.ndarray, n_q: int, confidence: float, extra: list[int] | None = None,
                  keys: tuple[str, ...] = SLICE_KEYS) -> tuple[list[int], dict[str, dict[str, BootstrapCI]]]:
    """Per figure, the best arm of ``group``, and intervals of each arm in ``others`` against it.

    ``extra``, when given, is one more compared arm per figure (reported as ``BEST_FLAT``).
    """
    means = values.mean(axis=0)
    n_f = values.shape[2]
    best = [_best_of(group, names, means[:, f]) for f in range(n_f)]
    pairs = [(a, f) for a in others for f in range(n_f) if a != best[f]]
    labels = [names[a] for a, _ in pairs]
    if extra is not None:
        more = [(a, f) for f, a in enumerate(extra)]
        pairs += more
        labels += [BEST_FLAT] * len(more)
    out: dict[str, dict[str, BootstrapCI]] = {}
    if not pairs:
        return best, out
    arm_i, fig_i = (np.array(col) for col in zip(*pairs))
    base_i = np.asarray(best)[fig_i]  # each figure's own baseline
    cis = bootstrap_cis(boot[:, arm_i, fig_i], boot[:, base_i, fig_i], means[arm_i, fig_i],
                        means[base_i, fig_i], n_q, confidence)
    for label, (_, f), ci in zip(labels, pairs, cis):
        out.setdefault(label, {})[keys[f]] = ci
    return best, out


def summarize_slice(name: str, arms: list[Arm], results: list[QuestionResult], resamples: int,
                    seed: int, confidence: float = 0.95, keys: tuple[str, ...] = SLICE_KEYS) -> SliceSummary:
    """Means of every arm over the slice's questions and, per figure, intervals against its best flat arm.

    With peer arms, tree arms and the best flat arm are also held to the best peer arm per figure.
    The question indices are drawn once for the slice and shared by every arm
    and figure (metrics.resampled_means), so 11 arms x 14 figures cost one draw.
    """
    members = [r for r in results if name in r.slices]
    summary = SliceSummary(name=name, n=len(members))
    if not members:
        return summary
    names = [a.name for a in arms]
    summary.means = {n: mean_metrics([r.scores[n] for r in members], SCORE_KEYS) for n in names}
    flat = [i for i, a in enumerate(arms) if a.kind == "flat"]
    peer = [i for i, a in enumerate(arms) if a.kind == "peer"]
    n_q, n_a, n_f = len(members), len(arms), len(keys)
    values = np.array([[[r.scores[n][k] for k in keys] for n in names] for r in members],
                      dtype=np.float64)  # (questions, arms, figures)
    boot = resampled_means(values.reshape(n_q, n_a * n_f), resamples, seed).reshape(-1, n_a, n_f)
    means = values.mean(axis=0)
    for i, name in enumerate(names):  # the graph channel against the same arm without it
        j = names.index(name[:-len(KG)]) if name.endswith(KG) and name[:-len(KG)] in names else None
        if j is not None:
            cis = bootstrap_cis(boot[:, i, :], boot[:, j, :], means[i], means[j], n_q, confidence)
            summary.vs_graph[name] = dict(zip(keys, cis))
    if not flat:
        return summary
    best_flat, summary.vs_baseline = _against_best(flat, list(range(n_a)), names, values, boot, n_q, confidence,
                                                   keys=keys)
    summary.baseline = {k: names[best_flat[f]] for f, k in enumerate(keys)}
    if peer:
        tree = [i for i, a in enumerate(arms) if a.is_tree]
        best_peer, summary.vs_peer = _against_best(peer, tree, names, values, boot, n_q, confidence,
                                                   extra=best_flat, keys=keys)
        summary.peer_baseline = {k: names[best_peer[f]] for f, k in enumerate(keys)}
    return summary


def summarize_slices(arms: list[Arm], results: list[QuestionResult], resamples: int,
                     seed: int, keys: tuple[str, ...] = SLICE_KEYS,
                     names: tuple[str, ...] = SLICES) -> dict[str, SliceSummary]:
    return {name: summarize_slice(name, arms, results, resamples, seed, keys=keys) for name in names}


def slice_keys(results: list[QuestionResult], arms: list[Arm]) -> tuple[str, ...]:
    """SLICE_KEYS, and PAGE_KEYS when every scored question has evidence pages (page@B defined)."""
    if results and all(r.pages for r in results) and all(
            r.scores[a.name].get(k) is not None for r in results for a in arms for k in PAGE_KEYS):
        return SLICE_KEYS + PAGE_KEYS
    return SLICE_KEYS


def label_slice_names(results: list[QuestionResult]) -> tuple[str, ...]:
    """``field=value`` of every question label of the scored questions, in first-seen order."""
    return tuple(dict.fromkeys(f"{f}={v}" for r in results for f, v in r.question.labels))


def add_peer_scores(qr: QuestionResult, peers: list[tuple[Arm, PeerArm]], index: Index) -> None:
    """Score each peer's ranking for the question against the peer's own chunks."""
    q = qr.question
    for arm, p in peers:
        rows, ms = p.results[q.id]
        rel = question_relevance(p.table, [(e.doc, e.spans) for e in q.evidence], q.scope)
        out = ArmOutput(rows=rows, details=[{} for _ in rows], sources=["peer"] * len(rows), latency_ms=ms,
                        contexts=p.contexts(rows))
        qr.outputs[p.name] = out
        qr.peer_relevance[p.name] = rel
        qr.scores[p.name] = _score(arm, out, rel, index, qr.pages, p.chunks[rows[0]][0] if rows else None)


def run_eval(opts: EvalOptions) -> EvalRun:
    t0 = time.perf_counter()
    if opts.k < 1:
        raise InputError(f"--k must be at least 1 (got {opts.k})")
    eval_set = load_eval_set(Path(opts.data), read=document_reader(opts))
    opts.notice(eval_set.summary_line())
    for ex in eval_set.missing_examples[:3]:
        opts.notice(f"  evidence skipped: {ex}")
    questions = sample_questions(eval_set.questions, opts.limit, opts.seed)

    peer_files = [(path, read_peer_file(path)) for path in opts.peers]  # before a long index build
    index, info = obtain_index(eval_set, opts, questions)
    names = opts.arms or all_arm_names(opts.llm is not None)
    base = opts.config.replace(embedder=index.embedder_identity.get("name", opts.config.embedder))
    arms = [make_arm(n, base, opts.k, paired_with_graph=n + KG in names) for n in names]
    fold_arms = _fold_arms(opts, eval_set, names, base) if opts.ranker_folds else None
    if opts.config.kg_mode != "off" and getattr(index, "kg", None) is None:
        opts.notice("kg_mode is a build setting and the evaluation index has no graphs; add them to a copy "
                    "with `index --kg rules` and pass it as --index (docs/graph.md)")
    if any(a.name.endswith(KG) for a in arms) and getattr(index, "kg", None) is None:
        opts.notice(f"the index has no long-leaf graphs: the {KG} arms equal their plain arms (add graphs with "
                    "`index --input DOCS --output COPY_OF_INDEX --kg rules`, then --index COPY_OF_INDEX)")
    backends = make_backends(index, base, opts.llm, long_running=True)
    backends.embedder = MemoQueryEmbedder(backends.embedder)  # every arm reuses a question's vector
    budgets = context_budgets(eval_set)
    ctx = ArmContext(index=index, backends=backends, rerank_pool=opts.rerank_pool, budgets=budgets)

    table = SpanTable.from_index(index)
    scored: list[tuple[Question, Relevance]] = []
    unscorable: list[str] = []
    slices: dict[str, frozenset[str]] = {}
    for q in questions:
        rel = question_relevance(table, [(e.doc, e.spans) for e in q.evidence], q.scope)
        if rel.scorable:
            scored.append((q, rel))
            slices[q.id] = frozenset(question_slices(rel, table))
        else:
            unscorable.append(q.id)
    if unscorable:
        opts.notice(f"{len(unscorable)} sampled question(s) have evidence no chunk of the index "
                    "covers (e.g. only in headings): not scored")
    if not scored:
        raise InputError("no question can be scored: no chunk of the index overlaps any evidence")

    taken = {a.name for a in arms}
    peers = [p for path, obj in peer_files
             for p in load_peer_arms(path, eval_set, [q.id for q, _ in scored], taken, obj)]

    cache_root = opts.cache_root or default_cache_root()
    cache = ResultCache(cache_root / "eval" / "results" / f"{info['identity']}.jsonl"
                        if opts.use_cache else None)
    code = code_fingerprint()
    per_question = ((q, rel, fold_arms[1][_fold_of(fold_arms[0], q.id)] if fold_arms else arms)
                    for q, rel in scored)
    jobs = [(q, rel, arm, arm_key(arm, opts, q, code, budgets)) for q, rel, q_arms in per_question for arm in q_arms]
    todo = sum(1 for q, _, arm, key in jobs if cache.get(q.id, arm.name, key) is None)
    computed = 0
    results: list[QuestionResult] = []
    bar = progress_stage(make_progress(opts.progress), f"questions ({len(arms)} arm(s) each, "
                         f"{len(jobs) - todo} of {len(jobs)} runs cached)", len(scored), "questions")
    try:
        if todo:
            _warm_up(ctx, next(iter(fold_arms[1].values())) if fold_arms else arms, scored[0][0])
        by_q: dict[str, QuestionResult] = {}
        for q, rel, arm, key in jobs:
            out = cache.get(q.id, arm.name, key)
            if out is None:
                doc_paths = set(q.scope) if q.scope else None
                ctx.backends.embedder.embed_query(q.query)  # untimed: every arm gets it cached
                out = run_arm(arm, ctx, q.query, doc_paths)
                cache.put(q.id, arm.name, key, out)
                computed += 1
            qr = by_q.get(q.id)
            if qr is None:
                qr = by_q[q.id] = QuestionResult(q, rel, {}, {}, slices[q.id] | {f"{f}={v}" for f, v in q.labels},
                                                 pages=evidence_pages(q))
                results.append(qr)
            qr.outputs[arm.name] = out
            qr.scores[arm.name] = _score(arm, out, rel, index, qr.pages,
                                         index.chunks[out.rows[0]].doc_path if out.rows else None)
            if len(qr.outputs) == len(arms):
                bar.advance(1)
    finally:
        bar.close()
        cache.close()
    if peers:
        peer_arms = [(Arm(p.name, "peer", p.system, base), p) for p in peers]
        arms = arms + [a for a, _ in peer_arms]
        for qr in results:
            add_peer_scores(qr, peer_arms, index)
    summaries = summarize(arms, results, opts.resamples, opts.seed)
    keys = slice_keys(results, arms)
    by_slice = summarize_slices(arms, results, opts.resamples, opts.seed, keys)
    by_label = summarize_slices(arms, results, opts.resamples, opts.seed, keys, label_slice_names(results))
    return EvalRun(options=opts, eval_set=eval_set, arms=arms, index=index, index_info=info,
                   sampled=len(questions), results=results, unscorable=unscorable,
                   summaries=summaries, computed=computed, cached=len(jobs) - computed,
                   seconds=time.perf_counter() - t0, slices=by_slice, peers={p.name: p for p in peers},
                   slice_keys=keys, label_slices=by_label)


def document_reader(opts: EvalOptions) -> Callable[[Path], tuple[list[Any], list[str]]]:
    """How the set's documents are read: through the evaluation cache's document store (one read per
    file and reader version, evaluation/doc_cache.py), with the build's read limits."""
    from evaluation.doc_cache import document_cache
    from tree_builder.readers.limits import ReadLimits

    cache = document_cache((opts.cache_root or default_cache_root()) if opts.use_cache else None,
                           ReadLimits.from_config(opts.config))

    def read(docs_dir: Path) -> tuple[list[Any], list[str]]:
        with progress_stage(make_progress(opts.progress, prefix="evaluation set: "), "reading documents") as st:
            out = cache.read(docs_dir, lambda n: st.tick(n, "documents"))
            st.count(len(out[0]), f"documents ({cache.reads} read, {cache.hits} from the cache)")
        return out

    return read


def _fold_arms(opts: EvalOptions, eval_set: Any, names: list[str], base: Config
               ) -> tuple[dict[str, int], dict[int, list[Arm]]]:
    """(question id -> fold, fold -> the arms with that fold's weights) of ``opts.ranker_folds``."""
    folder = Path(opts.ranker_folds or ".")
    text = read_text_bounded(folder / "folds.json", limit=64 * 1024 * 1024, what=f"--ranker-folds {folder}",
                             setting="folds.json lists question ids")
    name = Path(opts.data).resolve().name
    try:
        meta = json.loads(text)
        folds = int(meta["folds"])
        sets = meta["sets"]
        assigned = {str(k): int(v) for k, v in sets[_folds_set(sets, name, eval_set)].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InputError(f"--ranker-folds {folder}: folds.json has no folds for the set "
                         f"{name!r} ({type(exc).__name__}: {exc})") from None
    arms: dict[int, list[Arm]] = {}
    for f in range(folds):
        weights = folder / f"fold-{f}.json"
        load_ranker("tree", weights)  # a one-line error now, not after the first questions
        cfg = base.replace(ranker_weights=str(weights))
        arms[f] = [make_arm(n, cfg, opts.k, paired_with_graph=n + KG in names) for n in names]
    return assigned, arms


def _folds_set(sets: dict[str, Any], name: str, eval_set: Any) -> str:
    """The set of ``folds.json`` whose folds the evaluated set reads: its own name's, else the one set
    that holds every question of it (a cut of a set, ``sample_eval_set``, keeps the set's question
    ids under another folder name). A KeyError names the set when none or several do."""
    if name in sets:
        return name
    ids = {str(q.id) for q in eval_set.questions}
    holding = [k for k, v in sets.items() if isinstance(v, dict) and ids <= set(v)]
    if len(holding) != 1:
        raise KeyError(name)
    return holding[0]


def _fold_of(assigned: dict[str, int], qid: str) -> int:
    if qid not in assigned:
        raise InputError(f"--ranker-folds: question {qid!r} is in no fold (the folds were fitted on other "
                         "questions; out-of-fold figures need the questions they were drawn for)")
    return assigned[qid]
