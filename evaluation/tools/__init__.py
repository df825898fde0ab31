"""Maintainer tools around ``eval``: analyses of its ``--json`` output, answer-quality runs, the
relevance floor's calibration for a new embedder, a sampler of evaluation sets and an embedder check.

Run from the repository root, e.g. ``python -m evaluation.tools.tree_misses --help``. Not part of the
installed package's command line and not run by CI.
"""
