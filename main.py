"""TreeRAG command line: index | tree | query | interactive | history | show | eval.

Imports of heavy modules happen inside the command functions so that
``--help`` and mock runs start fast.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Callable, Sequence

from config import Config
from utils.errors import TreeRAGError

EMBEDDERS = ("hash", "local", "onnx", "openai", "use")


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _tqdm_progress(enabled: bool) -> Callable[[int, str], Callable[[int], None]] | None:
    """A progress factory for long steps; a bar on stderr only when it is a terminal or forced."""
    if not enabled:
        return None

    def factory(total: int, desc: str) -> Callable[[int], None]:
        from tqdm import tqdm

        bar = tqdm(total=total, desc=desc, unit="chunk", file=sys.stderr, leave=False,
                   disable=None, dynamic_ncols=True)

        def advance(n: int) -> None:
            bar.update(n)
            if bar.n >= total:
                bar.close()

        return advance

    return factory


# --------------------------------------------------------------------------- commands

def cmd_index(args: argparse.Namespace) -> int:
    from indexing.embedder import make_embedder
    from indexing.index_builder import build_index

    embedder_name = "hash" if args.mock else args.embedder
    config = Config(embedder=embedder_name, embedder_model=args.embedder_model,
                    max_depth=args.max_depth)
    embedder = make_embedder(embedder_name, config)
    report = build_index(Path(args.input), Path(args.output), config, embedder,
                         progress=_tqdm_progress(not args.quiet))
    for w in report.warnings:
        _stderr(f"warning: {w}")
    print(report.summary_line())
    return 0


def cmd_tree(args: argparse.Namespace) -> int:
    from tree_builder.parser import load_documents
    from tree_builder.summary import summarize_tree
    from tree_builder.tree import build_tree
    from tree_builder.visualizer import serialize_tree

    config = Config(max_depth=args.max_depth)
    path = Path(args.input)
    docs, warnings = load_documents(path)
    for w in warnings:
        _stderr(f"warning: {w}")
    root = build_tree(docs, config, folder_mode=path.is_dir())
    summarize_tree(root, config)
    print(serialize_tree(root))
    return 0


# --------------------------------------------------------------------------- parser

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="main.py",
        description="TreeRAG: structure-aware retrieval-augmented QA over Markdown documents.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    pi = sub.add_parser("index", help="build an index from a Markdown file or folder")
    pi.add_argument("--input", required=True, help="a Markdown file or a folder of them (recursive)")
    pi.add_argument("--output", required=True, help="index directory (replaced atomically)")
    pi.add_argument("--mock", action="store_true", help="offline mock models (hash embeddings)")
    pi.add_argument("--embedder", choices=EMBEDDERS, default="hash",
                    help="embedding backend (default: hash)")
    pi.add_argument("--embedder-model", default=None, help="model name or local path for the embedder")
    pi.add_argument("--max-depth", type=int, default=3, help="deepest heading level that becomes a node")
    pi.add_argument("--quiet", action="store_true", help="no progress bar")
    pi.set_defaults(func=cmd_index)

    pt = sub.add_parser("tree", help="print the serialised section tree (what the node locator sees)")
    pt.add_argument("--input", required=True, help="a Markdown file or a folder of them")
    pt.add_argument("--max-depth", type=int, default=3)
    pt.set_defaults(func=cmd_tree)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except TreeRAGError as exc:
        _stderr(f"error: {exc}")
        return exc.exit_code
    except KeyboardInterrupt:
        _stderr("interrupted")
        return 130
    except OSError as exc:
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        _stderr(f"error: {exc.strerror or exc}{where}")
        return 1
    except BrokenPipeError:
        # stdout closed early (e.g. piped into head): not an error worth a traceback
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0


if __name__ == "__main__":
    sys.exit(main())
