"""The tree as the text the node locator reads (the spec's "树结构序列化").

One serialiser for both ``python main.py tree`` and the locator prompt: ``tree`` shows the same
nodes, headings and summaries with labels in the documents' language and the file names, and
``tree --locator-view`` prints exactly what the LLM sees.
"""
from __future__ import annotations

from typing import Mapping

from tree_builder.doc_card import DocumentCard
from tree_builder.tree import TreeNode

HEADER = "文档结构:"
LEAF_MARK = " (叶子节点)"
SUMMARY_LABEL = "摘要:"

LABELS = {
    "zh": (HEADER, LEAF_MARK, SUMMARY_LABEL, "文件:"),
    "en": ("Document structure:", " (leaf)", "Summary:", "File:"),
}
"""(header, leaf mark, summary label, file label) of ``tree`` by the documents' language. The locator
prompt always uses the spec's Chinese labels; ``tree`` is read by a person, in the documents' language."""

CARD_LABELS = {
    "zh": ("文档卡片:", {"issuer": "发行人", "symbols": "证券代码", "form": "文件类型", "period": "期间", "file_name": "文件名(仅供参考)"}),
    "en": ("Card:", {"issuer": "issuer", "symbols": "trading symbols", "form": "form", "period": "period", "file_name": "file name"}),
}
"""(label, field names) of a document node's card line: what the document's first pages say it is."""


def _depth(node: TreeNode) -> int:
    return len(node.ancestors()) if node.parent is not None else 0


def node_blocks(root: TreeNode, include: set[str] | None = None,
                cards: Mapping[str, DocumentCard] | None = None) -> list[tuple[str, str]]:
    """(node_id, block text) in pre-order: what ``serialize_tree`` joins, one node at a time.

    Exposed so a budget can be summed per node instead of re-serialising the tree.
    """
    blocks: list[tuple[str, str]] = []
    # Explicit stack instead of ancestors() per node: depth is known on the way down.
    stack: list[tuple[TreeNode, int]] = [(root, -1)] if root.kind == "root" else [(root, _depth(root))]
    while stack:
        node, depth = stack.pop()
        stack.extend((c, depth + 1) for c in reversed(node.children))
        if depth < 0 or (include is not None and node.node_id not in include):
            continue
        blocks.append((node.node_id, node_block(node, depth, card=_card(node, cards))))
    return blocks


def _card(node: TreeNode, cards: Mapping[str, DocumentCard] | None) -> DocumentCard | None:
    return cards.get(node.doc_path) if cards and node.kind == "document" else None


def card_line(card: DocumentCard | None, depth: int, language: str = "zh") -> str:
    """A document node's card line (empty when the card states nothing beyond the title)."""
    if card is None:
        return ""
    label, names = CARD_LABELS[language]
    text = card.line(names)
    return f"\n{'  ' * depth}  {label} {text}" if text else ""


def node_block(node: TreeNode, depth: int, language: str = "zh", card: DocumentCard | None = None) -> str:
    """One node's lines of the serialisation (``depth`` 0 = a top-level node); a document node's
    ``card`` (issuer, form, period) under its heading, so a reader can tell look-alike documents apart."""
    _, leaf_mark, summary_label, _ = LABELS[language]
    indent = "  " * depth
    mark = leaf_mark if node.is_leaf else ""
    summary = " ".join(node.summary.split())
    return (f"{indent}[{node.node_id}] {node.heading}{mark}{card_line(card, depth, language)}\n"
            f"{indent}  {summary_label} {summary}").rstrip()


def readable_tree(root: TreeNode, language: str, cards: Mapping[str, DocumentCard] | None = None) -> str:
    """``tree`` for a person: the locator's serialisation with labels in the documents' language and
    a ``File:`` line where each document's sections begin (the locator's prompt names no files)."""
    header, _, _, file_label = LABELS[language]
    blocks: list[str] = []
    shown_doc = None
    stack: list[tuple[TreeNode, int]] = [(root, -1)] if root.kind == "root" else [(root, _depth(root))]
    while stack:
        node, depth = stack.pop()
        stack.extend((c, depth + 1) for c in reversed(node.children))
        if depth < 0:
            continue
        block = node_block(node, depth, language, _card(node, cards))
        if node.doc_path and node.doc_path != shown_doc:
            shown_doc = node.doc_path
            block = f"{'  ' * depth}{file_label} {node.doc_path}\n{block}"
        blocks.append(block)
    return header + "\n\n" + "\n\n".join(blocks)


def node_dict(node: TreeNode, children: list[dict]) -> dict:
    """One node of ``tree --json``: what it is and where it lies, with the given children."""
    return {"node_id": node.node_id, "heading": node.heading, "heading_path": node.heading_path,
            "kind": node.kind, "leaf": node.is_leaf, "doc_path": node.doc_path,
            "lines": [node.start_line, node.end_line],
            "pages": [node.page_start, node.page_end] if node.page_start else None,
            "summary": node.summary, "children": children}


def tree_dict(root: TreeNode) -> list[dict]:
    """The tree as nested JSON values (``tree --json``): what each node is and where it lies."""
    def one(node: TreeNode) -> dict:
        return node_dict(node, [one(c) for c in node.children])

    return [one(c) for c in root.children] if root.kind == "root" else [one(root)]


def join_blocks(blocks: list[str]) -> str:
    """The serialisation of these blocks (pre-order), as ``serialize_tree`` joins them."""
    return HEADER + "\n\n" + "\n\n".join(blocks)


def serialize_tree(root: TreeNode, include: set[str] | None = None,
                   cards: Mapping[str, DocumentCard] | None = None) -> str:
    """``文档结构:``, a blank line, then per node (pre-order, synthetic root skipped):

        {indent}[{id}] {heading}[ (叶子节点)]
        {indent}  摘要: {summary}

    with a blank line between nodes and two spaces of indent per depth
    (top-level nodes at column 0). ``include`` limits output to those node ids
    (the caller passes chosen leaves plus their ancestors to fit a budget). ``cards`` (document path ->
    card) adds a card line under each document node.
    """
    return join_blocks([text for _, text in node_blocks(root, include, cards)])
