"""The tree as the text the node locator reads (seed 000, "树结构序列化").

One serialiser for both ``python main.py tree`` and the locator prompt, so what
a user inspects is exactly what the LLM sees.
"""
from __future__ import annotations

from tree_builder.tree import TreeNode

HEADER = "文档结构:"
LEAF_MARK = " (叶子节点)"
SUMMARY_LABEL = "摘要:"


def _depth(node: TreeNode) -> int:
    return len(node.ancestors()) if node.parent is not None else 0


def node_blocks(root: TreeNode, include: set[str] | None = None) -> list[tuple[str, str]]:
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
        indent = "  " * depth
        mark = LEAF_MARK if node.is_leaf else ""
        summary = " ".join(node.summary.split())
        blocks.append((node.node_id, f"{indent}[{node.node_id}] {node.heading}{mark}\n"
                                     f"{indent}  {SUMMARY_LABEL} {summary}".rstrip()))
    return blocks


def serialize_tree(root: TreeNode, include: set[str] | None = None) -> str:
    """``文档结构:``, a blank line, then per node (pre-order, synthetic root skipped):

        {indent}[{id}] {heading}[ (叶子节点)]
        {indent}  摘要: {summary}

    with a blank line between nodes and two spaces of indent per depth
    (top-level nodes at column 0). ``include`` limits output to those node ids
    (the caller passes chosen leaves plus their ancestors to fit a budget).
    """
    return HEADER + "\n\n" + "\n\n".join(text for _, text in node_blocks(root, include))
