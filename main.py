"""TreeRAG command line: index | tree | query | interactive | serve | mcp | history | show | eval.

Imports of heavy modules happen inside the command functions so that
``--help`` and mock runs start fast.
"""
from __future__ import annotations

_OWN_PROCESS = False
"""True when this module runs the process (``python main.py``, ``treerag``), not when a test or a
program imports it: only then are signal handlers its to set."""


def _process_setup() -> None:
    """What a TreeRAG process sets before the heavy imports (``python main.py`` and ``treerag``)."""
    global _OWN_PROCESS
    _OWN_PROCESS = True
    import os
    import signal
    import sys

    # Ctrl-C while the interpreter is still importing: exit quietly, not with a traceback.
    # main() restores the normal KeyboardInterrupt once its handlers are in place.
    signal.signal(signal.SIGINT, lambda _s, _f: sys.exit(130))
    # One BLAS thread: on 2 cores a threaded mat-vec spins both and starves the
    # ONNX encoder that runs next (benchmarks/README.md, the latency benchmark's BLAS A/B).
    for var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")


if __name__ == "__main__":
    _process_setup()

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Sequence

from config import EMBEDDERS, LOCATORS, VERSION, Config, rerank_setting
from config import shown as shown_value
from utils.cli_shared import base_config, cache_dir, llm_budget, llm_timeout, print_json, stderr
from utils.errors import InputError, TreeRAGError

if TYPE_CHECKING:
    from utils.run_record import RunRecord


# --------------------------------------------------------------------------- commands

def _query_config(args: argparse.Namespace) -> Config:
    changes: dict = {}
    if getattr(args, "top_k", None) is not None:  # 0 and -1 are errors (Config validates), not the default
        changes["final_top_k"] = args.top_k
    if getattr(args, "locator", None):
        changes["locator"] = args.locator
    if getattr(args, "rerank", None):
        changes.update(rerank_setting(args.rerank))
    if getattr(args, "answer", None):
        changes["answer_mode"] = args.answer
    if getattr(args, "context_budget", None) is not None:
        changes["context_budget_chars"] = args.context_budget
    if getattr(args, "log_max_runs", None) is not None:
        changes["run_log_max_runs"] = args.log_max_runs
    if getattr(args, "mock", False):
        changes.setdefault("locator", "keyword")
        changes["reranker"] = "none"
        changes.setdefault("answer_mode", "concatenate")  # the spec's mock synthesis
    return base_config(args).replace(**changes)


class Session:
    """The CLI's flags over the Python API: one TreeRAG, opened once (interactive mode reuses it)."""

    def __init__(self, args: argparse.Namespace, long_running: bool = False) -> None:
        """``long_running``: interactive, serve and mcp answer many questions (Config.store_prewarm)."""
        from pipeline import TreeRAG
        from utils.run_log import default_log_path

        config = _query_config(args)
        config = config.replace(llm_query_budget_s=llm_budget(args, config.llm_query_budget_s))
        if not long_running and getattr(args, "doc", None) and config.store_prewarm == "auto":
            # one question scoped to documents: scored by filters, it needs no vector index, and loading
            # one beside it would cost a one-shot query more than the question itself (docs/seekdb.md)
            config = config.replace(store_prewarm="off")
        log = None if args.no_log else (Path(args.log) if args.log else default_log_path(os.environ))
        from utils.paths import index_dir_path

        self.rag = TreeRAG.open(index_dir_path(args.index, "--index"), llm="mock" if args.mock else args.llm, embedder=args.embedder,
                                log=log, env=os.environ, llm_timeout=llm_timeout(args, config),
                                use_cache=not args.no_cache, notice=stderr, config=config,
                                long_running=long_running)
        self.index = self.rag.index

    def ask(self, query: str, documents: list[str] | None = None) -> RunRecord:
        return self.rag.run(query, documents)


def _print_result(record: RunRecord, as_json: bool) -> None:
    """A run as ``query`` prints it: its JSON record, or the spec's terminal layout."""
    if as_json:
        print_json(record.to_dict())
    else:
        from utils.render import render_result

        print(render_result(record))


def cmd_query(args: argparse.Namespace) -> int:

    if not args.query or not args.query.strip():
        raise InputError("empty query: pass --query \"your question\"")
    session = Session(args)
    documents = _scoped_documents(args.doc, session.index) if args.doc else None
    record = session.ask(args.query, documents)
    _print_result(record, args.json)
    _top_k_notice(args.top_k, record, session.index.metadata["counts"]["chunks"])
    return 0


def _top_k_notice(top_k: int | None, record: RunRecord, index_chunks: int) -> None:
    """--top-k beyond what retrieval could return is said, not silently cut (a caller asking for
    100,000 chunks should know it got 24, and why)."""
    if top_k is None or record.notice:
        return
    got = len(record.retrieve.hits)
    if got >= top_k:
        return
    if top_k > index_chunks:
        stderr(f"note: --top-k {top_k:,} is more than the {index_chunks:,} chunks the index holds: "
                f"{got} returned")
    else:
        stderr(f"note: --top-k {top_k:,}: retrieval found {got} chunk(s) for this question")


def _scoped_documents(given: list[str], index: Any) -> list[str]:
    """``--doc`` values as the index's document paths. A document is named as the index lists it
    (folder-relative, e.g. ``papers/a.pdf``), or by a path to the file that ends with that name
    (``~/docs/papers/a.pdf``), or by its bare file name when only one document has it."""
    known = list(index.doc_rows)
    out: list[str] = []
    for raw in given:
        text = raw.strip()
        if not text:
            raise InputError("--doc is empty: name a document of the index (see: main.py info --index DIR)")
        if text in index.doc_rows:
            out.append(text)
            continue
        norm = text.replace("\\", "/")
        matches = [k for k in known if norm.endswith("/" + k) or k == norm.removeprefix("./")]
        if len(matches) > 1:  # docs/x/a.md ends in both a.md and x/a.md: the longer is the one meant
            longest = max(len(k) for k in matches)
            matches = [k for k in matches if len(k) == longest]
        if not matches:
            matches = [k for k in known if k.rsplit("/", 1)[-1] == norm.rsplit("/", 1)[-1]]
        if len(matches) != 1:
            held = ", ".join(known[:5]) + (f" and {len(known) - 5} more" if len(known) > 5 else "")
            why = "names several documents" if matches else "is not a document of the index"
            raise InputError(f"--doc {shown_value(text)} {why} (the index holds: {held})")
        out.append(matches[0])
    return list(dict.fromkeys(out))


INTERACTIVE_HELP = """Type a question and press Enter.
  :help   this help
  :json   toggle JSON output
  :quit   leave (or Ctrl-D)"""


def cmd_interactive(args: argparse.Namespace) -> int:
    session = Session(args, long_running=True)
    try:
        import readline  # noqa: F401  (line editing and history for input())

        hist = cache_dir() / "history"
        try:
            hist.parent.mkdir(parents=True, exist_ok=True)
            if hist.exists():
                readline.read_history_file(str(hist))
        except OSError:
            hist = None
    except ImportError:
        readline, hist = None, None
    as_json = args.json
    # prompts and notices go to stderr, and only for a person at a terminal: with --json (or piped
    # input) stdout carries nothing but the answers, one JSON document each
    tty = sys.stdin.isatty()

    def say(msg: str) -> None:
        if tty:
            stderr(msg)

    say(f"TreeRAG interactive: {session.index.metadata['counts']['documents']} document(s), "
        f"{session.index.metadata['counts']['chunks']} chunks. :help for commands, Ctrl-D to quit.")
    try:
        while True:
            try:
                if tty:
                    sys.stderr.write("query> ")
                    sys.stderr.flush()
                line = input()
            except EOFError:
                say("")
                break
            except KeyboardInterrupt:
                say("")
                break
            line = line.strip()
            if not line:
                continue
            if line in (":q", ":quit", ":exit"):
                break
            if line == ":help":
                stderr(INTERACTIVE_HELP)
                continue
            if line == ":json":
                as_json = not as_json
                say(f"JSON output {'on' if as_json else 'off'}")
                continue
            if line.startswith(":") and len(line) > 1 and line[1:].replace("-", "").isalpha():
                stderr(f"error: unknown command {line} (:help lists them)")
                continue
            try:
                _print_result(session.ask(line), as_json)
            except TreeRAGError as exc:
                stderr(f"error: {exc}")
            except KeyboardInterrupt:
                stderr("query interrupted")
    finally:
        if readline is not None and hist is not None:
            try:
                readline.write_history_file(str(hist))
            except OSError:
                pass
    return 0


HISTORY_MAX_LIMIT = 1_000_000


def cmd_history(args: argparse.Namespace) -> int:
    from utils.render import render_history
    from utils.run_log import RunLog, default_log_path

    if not 1 <= args.limit <= HISTORY_MAX_LIMIT:  # SQLite takes a 64-bit LIMIT; a larger int overflows
        raise InputError(f"--limit must be between 1 and {HISTORY_MAX_LIMIT:,} (got {str(args.limit)[:30]})")
    log = RunLog(Path(args.log) if args.log else default_log_path(os.environ), warn=stderr)
    print(render_history(log.recent(args.limit)))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from utils.run_log import RunLog, default_log_path

    log = RunLog(Path(args.log) if args.log else default_log_path(os.environ), warn=stderr)
    record = log.get(args.run_id)
    if record is None:
        raise InputError(f"no recorded run {shown_value(args.run_id)} (see: python main.py history)")
    _print_result(record, args.json)
    return 0


def cmd_graph(args: argparse.Namespace) -> int:
    """A long leaf's graph for a person to read: nodes with their chunks, edges as lines."""
    from indexing.index_store import load_index
    from retrieval.graph_channel import graph_listing, leaf_graph_dict, leaf_graph_text
    from utils.paths import index_dir_path
    from utils.render import json_safe, terminal_safe  # headings and node names are the documents' text

    index = load_index(index_dir_path(args.index, "--index"))
    if index.kg is None:
        raise InputError(f"index {args.index} has no graphs: build it with `index --kg rules` (docs/graph.md)")
    if args.leaf is None:
        rows = graph_listing(index)
        if args.json:
            print(json_safe(json.dumps(rows, ensure_ascii=False, indent=2)))
        else:
            print(index.kg.stats.line())
            for r in rows:
                print(terminal_safe(f"{r['leaf']:<14} {r['nodes']:>5} nodes {r['edges']:>6} edges  "
                                    f"max degree {r['max_degree']:>4}  {r['heading_path']}"))
        return 0
    graph = index.kg.for_leaf(args.leaf)
    if graph is None:
        known = args.leaf in index.leaf_rows
        raise InputError(f"leaf {args.leaf!r} " + ("has no graph (it is not longer than kg_min_leaf_chars)"
                                                   if known else "is not a leaf of the index"))
    if args.json:
        print(json_safe(json.dumps(leaf_graph_dict(index, graph), ensure_ascii=False, indent=2)))
    else:
        print(terminal_safe(leaf_graph_text(index, graph)))
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """What a load skips to stay fast at scale: full sha256 of every file, every record, every vector."""
    from indexing.index_store import verify_index
    from utils.paths import index_dir_path

    path = index_dir_path(args.index, "--index")
    print(verify_index(path).line(path))
    return 0


def cmd_upgrade(args: argparse.Namespace) -> int:
    """Add what a newer build writes and a query can use to an index, without rebuilding it."""
    from indexing.upgrade import upgrade
    from utils.paths import index_dir_path

    path = index_dir_path(args.index, "--index")
    config = base_config(args)
    bm25 = config.tuning.bm25
    added = upgrade(path, bm25.bm25_k1, bm25.bm25_b)
    from indexing.card_upgrade import add_cards

    cards = add_cards(path)
    done = ([f"added {', '.join(added)} (BM25 weights for k1 {bm25.bm25_k1}, b {bm25.bm25_b})"] if added else []) \
        + ([f"added the cards of {cards} document(s) (title, issuer, form, period)"] if cards else [])
    print(f"{path}: {'; '.join(done)}" if done else f"{path}: already up to date")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from indexing.index_info import index_info, render_info
    from utils.paths import index_dir_path

    info = index_info(index_dir_path(args.index, "--index"))
    if args.json:
        print_json(info)
    else:
        from utils.render import terminal_safe

        print(terminal_safe(render_info(info)))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from server.cli import serve, serve_settings
    from utils.paths import index_dir_path

    settings = serve_settings(args)
    session = Session(args, long_running=True)
    return serve(session.rag, index_dir_path(args.index, "--index"), settings, version(), args.embedder, stderr)


def cmd_mcp(args: argparse.Namespace) -> int:
    from server.cli import serve_mcp_stdio, serve_settings
    from utils.paths import index_dir_path

    settings = serve_settings(args)
    session = Session(args, long_running=True)
    return serve_mcp_stdio(session.rag, index_dir_path(args.index, "--index"), settings, version(), args.embedder,
                           stderr)


# --------------------------------------------------------------------------- parser

class OneLineParser(argparse.ArgumentParser):
    """Every usage error is one ``error:`` line (the usage block is for ``--help``), like every other
    error of the CLI; sub-commands inherit it (add_subparsers uses the parser's own class)."""

    def error(self, message: str) -> NoReturn:
        # argparse quotes the value it refused whole: a 5,000-digit number is cut like config.shown cuts
        message = re.sub(r"'[^']{80,}'", lambda m: m.group()[:78] + "…'", message)
        self.exit(2, f"error: {message} (see: {self.prog} --help)\n")


def version() -> str:
    """The installed package's version; a checkout that was never installed reports config.VERSION
    (the same number: pyproject.toml reads it from there)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("treerag")
    except PackageNotFoundError:
        return VERSION


class _VersionAction(argparse.Action):
    """``--version``, the version looked up only when asked: the lookup imports importlib.metadata
    (and email, some thirty files), which every other command would otherwise read at start-up."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"treerag {version()}")
        parser.exit(0)


def build_parser(prog: str = "main.py") -> argparse.ArgumentParser:
    d = Config()  # every stated default comes from here, so help cannot drift from what runs
    p = OneLineParser(
        prog=prog,
        description="TreeRAG: structure-aware retrieval-augmented QA over long documents "
                    "(Markdown, text, PDF, Word, HTML; English and Chinese), with a citation for every claim.")
    p.add_argument("--version", action=_VersionAction, nargs=0, help="show program's version number and exit")
    p.add_argument("--config", default=None,
                   help="TOML file of config.py settings (default: $TREERAG_CONFIG or ./treerag.toml)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    from indexing.build_cli import add_index_arguments
    from tree_builder.tree_cli import add_tree_arguments

    add_index_arguments(sub, d)
    add_tree_arguments(sub, d)

    def query_options(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--index", required=True, help="index directory built by `index`")
        sp.add_argument("--mock", action="store_true",
                        help="the spec's mock: keyword locating, no rerank, concatenated answer")
        sp.add_argument("--llm", default=None,
                        help="PROVIDER[:MODEL]: mock, anthropic, openai (default: $TREERAG_LLM or auto)")
        sp.add_argument("--embedder", choices=EMBEDDERS, default=None,
                        help="embedder to query with (default: the one the index was built with)")
        sp.add_argument("--locator", choices=LOCATORS, default=None,
                        help=f"node locator (default {d.locator}" + (": llm when configured, else hybrid)" if d.locator == "auto" else ")"))
        sp.add_argument("--top-k", type=int, default=None, help=f"chunks kept after rerank (default {d.final_top_k})")
        sp.add_argument("--context-budget", type=int, default=None, metavar="CHARS",
                        help=f"characters of document text the answer step reads (default {d.context_budget_chars})")
        sp.add_argument("--rerank", default=None,
                        help="none | cross-encoder | a cross-encoder model path or name in the local cache")
        sp.add_argument("--answer", choices=("extractive", "concatenate"), default=None,
                        help="answer without an LLM: extractive (the best sentences) or concatenate (the spec's "
                             f"mock: every retrieved chunk whole); default {d.answer_mode}")
        sp.add_argument("--json", action="store_true", help="print the pipeline result as JSON only")
        sp.add_argument("--no-cache", action="store_true", help="bypass the LLM response cache")
        sp.add_argument("--llm-timeout", default=None,
                        help=f"wall-clock seconds per LLM request (default: $TREERAG_LLM_TIMEOUT or {d.llm_timeout_s:g})")
        sp.add_argument("--llm-budget", default=None,
                        help=f"wall-clock seconds for all LLM calls of one query, retries included (default {d.llm_query_budget_s:g})")
        sp.add_argument("--no-log", action="store_true", help="do not record this run")
        sp.add_argument("--log", default=None, help="run log SQLite file (default: $TREERAG_LOG or user data dir)")
        sp.add_argument("--log-max-runs", type=int, default=None, metavar="N",
                        help="runs the run log keeps; older ones are deleted as new ones are recorded "
                             "(0 keeps all; default: setting run_log_max_runs, 2000)")

    pq = sub.add_parser("query", help="answer one question from an index")
    query_options(pq)
    pq.add_argument("--query", "-q", required=True, help="the question")
    pq.add_argument("--doc", action="append", default=None, metavar="PATH",
                    help="answer only from this document of the index (repeatable; as `info` lists it, "
                         "or a path ending in it)")
    pq.set_defaults(func=cmd_query)

    pa = sub.add_parser("interactive", help="ask questions in a loop (models loaded once)")
    query_options(pa)
    pa.set_defaults(func=cmd_interactive)

    from server.cli import add_serve_arguments

    add_serve_arguments(sub, query_options, cmd_serve, cmd_mcp)

    ph = sub.add_parser("history", help="list recent recorded runs")
    ph.add_argument("--limit", type=int, default=20)
    ph.add_argument("--log", default=None)
    ph.set_defaults(func=cmd_history)

    ps = sub.add_parser("show", help="print a recorded run as `query` printed it")
    ps.add_argument("run_id", help="run id or a unique prefix of it (>= 6 characters)")
    ps.add_argument("--json", action="store_true")
    ps.add_argument("--log", default=None)
    ps.set_defaults(func=cmd_show)

    pn = sub.add_parser("info", help="what an index holds: documents, embedder and why, chunks, build, store, size")
    pn.add_argument("--index", required=True, help="index directory built by `index`")
    pn.add_argument("--json", action="store_true", help="print it as JSON")
    pn.set_defaults(func=cmd_info)

    pv = sub.add_parser("verify", help="check every byte of an index (a load checks structure and samples)")
    pv.add_argument("--index", required=True, help="index directory built by `index`")
    pv.set_defaults(func=cmd_verify)

    pu = sub.add_parser("upgrade", help="add what newer builds store (BM25 weights, document cards) to an existing index (no rebuild)")
    pu.add_argument("--index", required=True, help="index directory built by `index`")
    pu.set_defaults(func=cmd_upgrade)

    pg = sub.add_parser("graph", help="print the graph of a long leaf (or list the leaves that have one)")
    pg.add_argument("--index", required=True, help="index directory built with `index --kg rules|llm`")
    pg.add_argument("--leaf", default=None, help="node id of a leaf (default: list the leaves with graphs)")
    pg.add_argument("--json", action="store_true", help="print it as JSON")
    pg.set_defaults(func=cmd_graph)

    from evaluation.cli import add_eval_parser

    add_eval_parser(sub)
    return p


def main(argv: Sequence[str] | None = None, prog: str = "main.py") -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if _OWN_PROCESS:
        import signal

        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return int(args.func(args) or 0)
    except TreeRAGError as exc:
        stderr(f"error: {exc}")
        return exc.exit_code
    except KeyboardInterrupt:
        stderr("interrupted")
        return 130
    except BrokenPipeError:
        # stdout closed early (e.g. piped into head): not an error worth a message
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except OSError as exc:
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        stderr(f"error: {exc.strerror or exc}{where}")
        return 1


def console() -> int:
    """The ``treerag`` console script (pyproject.toml): ``treerag index ...`` is ``python main.py index ...``."""
    _process_setup()
    return main(prog="treerag")


if __name__ == "__main__":
    sys.exit(main())
