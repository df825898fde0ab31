"""The ``eval`` sub-command: argument parsing and the call into the runner.

Wired into main.py with ``add_eval_parser(sub)``; heavy imports happen inside
``cmd_eval`` so ``main.py --help`` stays fast.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Mapping

from config import (EMBEDDERS, Config, auto_embedder_help, coerce_setting, llm_timeout_seconds, load_config_file,
                    rerank_setting)
from utils.errors import InputError



def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def parse_overrides(items: list[str] | None) -> dict[str, Any]:
    """``["fusion=rrf", "hybrid_top_leaves=5"]`` -> typed Config changes (config.coerce_setting)."""
    out: dict[str, Any] = {}
    for item in items or []:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise InputError(f"--set expects KEY=VALUE, got {item!r}")
        try:
            out[name] = coerce_setting(name, raw.strip())
        except InputError as exc:
            msg = str(exc)
            raise InputError("--set " + msg[len("setting "):] if msg.startswith("setting ")
                             else f"--set {name}: {msg}") from None
    return out


def eval_config(args: argparse.Namespace, env: Mapping[str, str] = os.environ) -> Config:
    """The base config of every arm: the config file as every other command reads it (``--config``,
    else $TREERAG_CONFIG, else ./treerag.toml), then --set, --rerank and --embedder over it; a value
    out of range is one line naming the --set."""
    config_path = getattr(args, "config", None)
    base = load_config_file(Path(config_path) if config_path else None, env)
    changes = parse_overrides(args.set)
    if args.rerank:
        changes.update(rerank_setting(args.rerank))
    if args.embedder:
        changes["embedder"] = args.embedder
    return base.replace(**changes)


def _make_llm(spec: str | None, cache_root: Path, timeout_s: float) -> Any:
    """A real LLM client for the tree-llm arms, or None (no --llm, or it resolves to the mock).

    Its response cache is always on: locating is deterministic at temperature 0,
    and a rerun of an evaluation should not pay for the same calls twice.
    """
    if spec is None:
        return None
    from pipeline import has_real_llm  # main.py builds this parser at start-up: the query stack loads when eval runs
    from utils.llm.factory import make_llm

    # $TREERAG_LLM_TIMEOUT: a CPU-served local model needs minutes per locating prompt (tools/local_llm/README.md)
    llm = make_llm(spec, os.environ, cache_dir=cache_root, use_cache=True, notice=_stderr,
                   timeout=llm_timeout_seconds(None, os.environ, timeout_s))
    if not has_real_llm(llm):
        _stderr(f"--llm {spec}: no real LLM configured; the tree-llm arms are not run")
        return None
    return llm


def cmd_eval(args: argparse.Namespace) -> int:
    from evaluation.arms import parse_arms  # main.py builds this parser at start-up: eval's modules load when it runs
    from evaluation.report import format_table, write_json
    from evaluation.eval_index import default_cache_root
    from evaluation.runner import EvalOptions, run_eval

    for flag, value, low in (("--k", args.k, 1), ("--resamples", args.resamples, 1),
                             ("--rerank-pool", args.rerank_pool, 1)):
        if value < low:
            raise InputError(f"{flag} must be at least {low} (got {value})")
    if args.limit is not None and args.limit < 1:
        raise InputError(f"--limit must be at least 1 (got {args.limit})")
    if args.json:
        parent = Path(args.json).expanduser().resolve().parent
        if not parent.is_dir():
            raise InputError(f"--json: folder {parent} does not exist")
    config = eval_config(args)
    cache_root = Path(args.cache_dir).expanduser() if args.cache_dir else default_cache_root()
    llm = _make_llm(args.llm, cache_root, config.llm_timeout_s)
    arms = parse_arms(args.arms, with_llm=llm is not None)
    opts = EvalOptions(data=Path(args.data), index=Path(args.index) if args.index else None, arms=arms,
                       limit=args.limit, seed=args.seed, k=args.k, embedder=args.embedder,
                       config=config, llm=llm, cache_root=cache_root, use_cache=not args.no_cache,
                       rebuild=args.rebuild, resamples=args.resamples, rerank_pool=args.rerank_pool,
                       progress=not args.quiet, notice=_stderr,
                       peers=[Path(p).expanduser() for p in args.peer or []],
                       ranker_folds=Path(args.ranker_folds).expanduser() if args.ranker_folds else None)
    try:
        run = run_eval(opts)
    except KeyboardInterrupt:
        if opts.use_cache:
            _stderr("interrupted: finished runs are cached; rerun the same command to resume")
        raise
    print(format_table(run))
    if args.json:
        write_json(run, Path(args.json).expanduser())
        _stderr(f"wrote {args.json}")
    return 0


def add_eval_parser(sub: Any) -> argparse.ArgumentParser:
    pe = sub.add_parser(
        "eval", help="score retrieval arms (flat and tree) on a labelled question set",
        description="Run every question of an evaluation set (docs/ + qa.jsonl) through flat and "
                    "TreeRAG retrieval arms and print Hit@k, evidence recall, MRR, nDCG, leaf "
                    "recall/precision, cov@2k and latency (and page@B, doc@1 where evidence names its page), with "
                    "paired-bootstrap intervals against the best flat arm, per slice and per question label.")
    pe.add_argument("--data", required=True, help="evaluation set folder holding docs/ and qa.jsonl")
    pe.add_argument("--index", default=None,
                    help="reuse this index of the set's docs/ (default: a cached build keyed by content)")
    pe.add_argument("--arms", default=None,
                    help="comma list of arms (default: all available): flat-bm25, flat-dense, flat-hybrid, "
                         "flat-hybrid-rrf, flat-learned, flat-hybrid-card, tree-keyword, tree-hybrid, tree-llm, "
                         "tree-llm-rerank, each tree arm +net")
    pe.add_argument("--limit", type=int, default=None,
                    help="score a random sample of N questions. Unless an index of the whole set is "
                         "cached (or --index is given), only the documents the sampled questions are "
                         "scoped to are indexed (cached separately; collection-wide statistics such as "
                         "IDF then cover those documents only); a sample with a question over the whole "
                         "collection indexes every document")
    pe.add_argument("--seed", type=int, default=0, help="sample and bootstrap seed (default 0)")
    pe.add_argument("--k", type=int, default=10, help="chunks every arm returns (default 10)")
    pe.add_argument("--json", default=None, metavar="OUT",
                    help="also write the table and every ranked list to this JSON file")
    pe.add_argument("--embedder", choices=("auto",) + EMBEDDERS, default=None,
                    help=f"embedder for the index build (default {Config.embedder}: {auto_embedder_help()}; "
                         f"with --index: the index's own)")
    pe.add_argument("--rerank", default=None,
                    help="none | cross-encoder | a cross-encoder model path: applied to every arm")
    pe.add_argument("--llm", default=None,
                    help="PROVIDER[:MODEL] (anthropic, openai) to run the tree-llm and tree-llm-rerank arms")
    pe.add_argument("--set", action="append", default=None, metavar="KEY=VALUE",
                    help="override a setting for every arm, e.g. --set fusion=rrf or "
                         "--set document_order=section-every (evaluation/variants.py; repeatable)")
    pe.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (default 10000)")
    pe.add_argument("--rerank-pool", type=int, default=20,
                    help="flat candidates handed to the reranker when --rerank is on (default 20)")
    pe.add_argument("--cache-dir", default=None,
                    help="where indexes and results are cached (default: $TREERAG_CACHE_DIR or user cache)")
    pe.add_argument("--no-cache", action="store_true", help="recompute every result (nothing read or written)")
    pe.add_argument("--rebuild", action="store_true", help="rebuild the cached index even if it matches")
    pe.add_argument("--peer", action="append", default=None, metavar="FILE",
                    help="score another system's rankings beside the arms (a file written by "
                         "benchmarks/peer_llamaindex.py; repeatable)")
    pe.add_argument("--ranker-folds", default=None, metavar="DIR",
                    help="run each question with the section ranker's weights fitted without its document "
                         "(a folder written by `python -m evaluation.learn_ranker --folds-out DIR`): "
                         "out-of-fold figures")
    pe.add_argument("--quiet", action="store_true",
                    help="no progress (index build stages and questions answered)")
    pe.set_defaults(func=cmd_eval)
    return pe
