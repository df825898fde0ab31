"""The columns of ``node_table.npy`` and the node kinds its KIND column numbers.

A module of its own because both the node table (indexing/node_table.py) and the segments that
compose one from several tables (indexing/segments.py) read the columns, and the node table uses the
segments' row runs: the shared layout sits below both.
"""
from __future__ import annotations

KINDS = ("root", "document", "section", "intro")
"""Node kinds by the number stored in the KIND column."""
PARENT, DOC, KIND = 0, 1, 2
"""Columns of the int32 (nodes, 3) table: the parent's row (-1 for the root), the document's number
(-1 for the root), the kind's position in ``KINDS``."""
