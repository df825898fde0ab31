"""``main.py tree``: print the section tree of a document or a folder (what the locator sees)."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from config import Config
from tree_builder.tree import LONG_SECTION_CHARS
from utils.cli_shared import base_config, print_json, stderr
from utils.errors import InputError


def add_tree_arguments(sub: Any, d: Config) -> None:
    """The ``tree`` sub-command on ``sub`` (main.py's sub-parsers); ``d``: the defaults its help states."""
    pt = sub.add_parser("tree", help="print the section tree of a document or a folder (what the locator sees)")
    pt.add_argument("--input", required=True, help="a document or a folder of them")
    pt.add_argument("--follow-links", action="store_true",
                    help="follow symlinks that lead out of the input folder")
    pt.add_argument("--max-depth", type=int, default=None,
                    help=f"deepest heading level that becomes a node, 0-6 (default {d.max_depth}; a section over "
                         f"{LONG_SECTION_CHARS:,} characters opens the level inside it)")
    pt.add_argument("--json", action="store_true", help="print the tree as JSON (nested nodes, file names, lines)")
    pt.add_argument("--locator-view", action="store_true",
                    help="print exactly the text the LLM locator reads (the spec's format and labels)")
    pt.set_defaults(func=cmd_tree)


def cmd_tree(args: argparse.Namespace) -> int:
    from tree_builder.loader import load_documents
    from tree_builder.summary import summarize_tree
    from tree_builder.tree import build_tree
    from tree_builder.visualizer import serialize_tree

    if not args.input.strip():
        raise InputError("--input is empty: name a document or a folder")
    config = base_config(args)
    if args.max_depth is not None:  # 0 and -1 are errors (Config validates), not the default
        config = config.replace(max_depth=args.max_depth)
    path = Path(args.input)
    from tree_builder.readers.limits import ReadLimits

    docs, warnings = load_documents(path, follow_links=args.follow_links, limits=ReadLimits.from_config(config))
    for w in warnings:
        stderr(f"warning: {w}")
    root = build_tree(docs, config, folder_mode=path.is_dir())
    summarize_tree(root, config)
    from tree_builder.doc_card import read_card

    cards = {d.path: read_card(d.text, d.title, d.path, d.page_starts) for d in docs}
    if args.json:
        from tree_builder.visualizer import tree_dict

        print_json({"documents": [{"path": d.path, "title": d.title, "kind": d.kind, "card": cards[d.path].record()}
                                   for d in docs],
                     "nodes": tree_dict(root)})
        return 0
    from utils.render import terminal_safe

    if args.locator_view:
        print(terminal_safe(serialize_tree(root, cards=cards)))
        return 0
    from config import CJK_SHARE_FOR_MULTILINGUAL
    from tree_builder.visualizer import readable_tree
    from utils.tokenizer import cjk_share

    chars = sum(len(d.text) for d in docs)
    share = sum(cjk_share(d.text) * len(d.text) for d in docs) / chars if chars else 0.0
    print(terminal_safe(readable_tree(root, "zh" if share >= CJK_SHARE_FOR_MULTILINGUAL else "en", cards)))
    return 0
