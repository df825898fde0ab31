"""``main.py index``: its options, and the build they ask for (the embedder, the LLM for summaries,
outline checks and graphs under one budget, the store), with its report printed."""
from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from config import EMBEDDERS, Config, auto_embedder_help
from tree_builder.tree import LONG_SECTION_CHARS
from utils.cli_shared import base_config, cache_dir, llm_budget, llm_timeout, stderr
from utils.errors import InputError
from utils.progress import make_progress


def add_index_arguments(sub: Any, d: Config) -> None:
    """The ``index`` sub-command on ``sub`` (main.py's sub-parsers); ``d``: the defaults its help states."""
    pi = sub.add_parser("index", help="build an index from a document or a folder (md, txt, pdf, docx, html)")
    pi.add_argument("--input", required=True,
                    help="a document (Markdown, text, PDF, Word .docx, HTML) or a folder of them (recursive)")
    pi.add_argument("--follow-links", action="store_true",
                    help="follow symlinks that lead out of the input folder (default: skip them)")
    pi.add_argument("--output", required=True,
                    help="index directory (replaced atomically; an index already there built with the same "
                         "settings is updated: only new and changed documents are embedded)")
    pi.add_argument("--store", default=None, metavar="URI",
                    help="where the index lives: files (default), seekdb:///abs/path (embedded seekdb) or "
                         "seekdb://USER[:PASS]@HOST:PORT/DATABASE (seekdb server, OceanBase); the password may "
                         "come from $TREERAG_SEEKDB_PASSWORD and is never written. Default: where the index at "
                         "--output already lives")
    pi.add_argument("--rebuild", action="store_true",
                    help="re-embed every document even when an index with the same settings is there")
    pi.add_argument("--compact", action="store_true",
                    help="rewrite an updated index as one merged index (a full build's files; unchanged "
                         "documents' vectors and summaries are lent) instead of adding a delta segment")
    pi.add_argument("--mock", action="store_true", help="offline mock models (hash embeddings)")
    pi.add_argument("--embedder", choices=("auto",) + EMBEDDERS, default=None,
                    help=f"embedding backend (default {d.embedder}: {auto_embedder_help()})")
    pi.add_argument("--embedder-model", default=None, help="model name or local path for the embedder")
    pi.add_argument("--max-depth", type=int, default=None,
                    help=f"deepest heading level that becomes a node, 0-6 (default {d.max_depth}; 0 = one leaf per "
                         f"document; a section over {LONG_SECTION_CHARS:,} characters opens the level inside it)")
    pi.add_argument("--summaries", choices=("extractive", "llm"), default=None,
                    help=f"node summaries: extractive (no LLM) or llm (default {d.summary_mode})")
    pi.add_argument("--structure", choices=("rules", "llm"), default=None,
                    help="document outlines: rules (contents page, division words, layout; no LLM) or llm "
                         f"(the rules' outline checked by an LLM, headings only) (default {d.structure_mode})")
    pi.add_argument("--llm", default=None, help="PROVIDER[:MODEL] for --summaries llm / --structure llm")
    pi.add_argument("--summary-workers", type=int, default=None,
                    help=f"concurrent LLM summary calls (default {d.summary_workers})")
    pi.add_argument("--no-cache", action="store_true", help="bypass the LLM response cache")
    pi.add_argument("--llm-timeout", default=None,
                    help=f"wall-clock seconds per LLM request (default: $TREERAG_LLM_TIMEOUT or {d.llm_timeout_s:g})")
    pi.add_argument("--llm-budget", default=None,
                    help=f"wall-clock seconds for all LLM calls of the build: summaries, outline checks, graphs "
                         f"(default {d.llm_build_budget_s:g})")
    pi.add_argument("--kg", choices=("off", "rules", "llm"), default=None,
                    help=f"a local graph for every long leaf: rules (no LLM), llm, or off (default {d.kg_mode}; "
                         "docs/graph.md)")
    pi.add_argument("--kg-min-leaf-chars", type=int, default=None,
                    help=f"leaves longer than this get a graph (default {d.tuning.graph.kg_min_leaf_chars})")
    pi.add_argument("--quiet", action="store_true",
                    help="no progress (default: a live bar per stage on a terminal, one line per stage otherwise)")
    pi.set_defaults(func=cmd_index)


def cmd_index(args: argparse.Namespace) -> int:
    from indexing.embedders.factory import make_embedder
    from indexing.index_builder import build_index

    from utils.paths import index_dir_path

    if not args.input.strip():
        raise InputError("--input is empty: name a document or a folder")
    output = index_dir_path(args.output, "--output")
    base = base_config(args)
    embedder_name = "hash" if args.mock else (args.embedder or base.embedder)
    config = base.replace(embedder=embedder_name,
                          embedder_model=args.embedder_model or base.embedder_model,
                          max_depth=base.max_depth if args.max_depth is None else args.max_depth,
                          summary_mode=args.summaries or base.summary_mode,
                          structure_mode=args.structure or base.structure_mode,
                          kg_mode=args.kg or base.kg_mode,
                          kg_min_leaf_chars=base.tuning.graph.kg_min_leaf_chars if args.kg_min_leaf_chars is None
                          else args.kg_min_leaf_chars)
    embedder = None if embedder_name == "auto" else make_embedder(embedder_name, config)
    config = config.replace(llm_build_budget_s=llm_budget(args, config.llm_build_budget_s))
    llm_timeout(args, config)  # a bad value is an error even without --summaries llm
    summarizer, usage, workers, llm, structure = None, None, 1, None, None
    if config.summary_mode == "llm" or config.kg_mode == "llm" or config.structure_mode == "llm":
        from utils.llm.factory import make_llm, resolve_llm_spec
        from utils.llm.types import UsageMeter

        spec = resolve_llm_spec(args.llm, os.environ, None if base.llm == "auto" else base.llm)
        llm = make_llm(spec, os.environ, cache_dir=cache_dir(), use_cache=not args.no_cache,
                       notice=stderr, timeout=llm_timeout(args, config))
        if getattr(llm, "provider", "mock") == "mock":
            what = ("--summaries llm" if config.summary_mode == "llm"
                    else "--structure llm" if config.structure_mode == "llm" else "--kg llm")
            raise InputError(f"{what} needs an LLM: set ANTHROPIC_API_KEY or OPENAI_API_KEY/"
                             "OPENAI_BASE_URL, or pass --llm")
        from utils.llm.budget import with_budget

        # one budget and circuit breaker for the whole build: a dead or unauthorised
        # server costs a few requests, not one per node
        llm = with_budget(llm, config.llm_build_budget_s, max_failures=config.llm_max_failures)
        usage = UsageMeter()
    if config.structure_mode == "llm":
        from tree_builder.llm_structure import StructureChecker

        structure = StructureChecker(llm, usage)
    if config.summary_mode == "llm":
        from tree_builder.llm_summary import LLMSummarizer

        summarizer = LLMSummarizer(llm, config, usage)
        workers = config.summary_workers if args.summary_workers is None else args.summary_workers
    report = build_index(Path(args.input), output, config, embedder,
                         progress=make_progress(not args.quiet), summarizer=summarizer,
                         summary_workers=workers, follow_links=args.follow_links, update=not args.rebuild,
                         store=_store(args.store or config.store, output),
                         kg_llm=llm if config.kg_mode == "llm" else None, compact=args.compact,
                         structure=structure)
    if report.rebuild_reason:
        stderr(f"note: rebuilding every document: {report.rebuild_reason}")
    for n in report.notes:
        stderr(f"note: {n}")
    for w in report.warnings:
        stderr(f"warning: {w}")
    print(report.summary_line())
    if report.kg is not None:
        print(report.kg.line())
    if structure is not None:
        print(structure.stats.line() + ("" if summarizer is not None else f"; {usage.total().describe()}"))
        for f in structure.stats.failures:
            stderr(f"warning: outline check failed {f}")
    if summarizer is not None:
        st = summarizer.stats
        print(f"summaries: {st.llm_calls} by LLM, {st.kept_own_text} short sections kept their own text, "
              f"{st.failed} failed (extractive used); {usage.total().describe()}")
        for f in st.failures:
            stderr(f"warning: summary failed {f}")
    if llm is not None:
        budget = getattr(llm, "budget", None)
        if budget is not None and budget.open_reason:
            stderr(f"warning: stopped calling the LLM during the build after: {budget.open_reason}")
    return 0


def _store(given: str | None, output: Path) -> Any:
    """Where the built index lives: ``--store`` (a seekdb URI, or "files"), else where the index
    already at ``output`` lives, else files. None means files."""
    if given is None:
        from indexing.build_output import engine_tables_of

        current = engine_tables_of(output)
        return current[0] if current else None
    if given == "files":
        return None
    from indexing.seekdb.uri import parse_store_uri

    return parse_store_uri(given)
