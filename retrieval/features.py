"""The one registry of the features a ranker's model may name: feature -> the stage that computes it.

``section`` features are computed for every chunk of a scope (retrieval/section_features.py), ``union``
features for a collection question's union candidates (retrieval/union_features.py). A weights file
naming anything else is refused when it is read (retrieval/learned_ranker.py); a new feature is
computed in one of the two modules and listed in its tuple, and so appears here.
"""
from __future__ import annotations

from retrieval.section_features import ALL_FEATURES
from retrieval.union_features import UNION_FEATURES

FEATURES: dict[str, str] = {**dict.fromkeys(ALL_FEATURES, "section"), **dict.fromkeys(UNION_FEATURES, "union")}
