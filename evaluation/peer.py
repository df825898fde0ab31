"""Another system's rankings, scored beside our arms (``eval --peer FILE``).

A peer (benchmarks/peer_llamaindex.py writes one) chunks the documents its own way, so its rows
are not our index's rows. It hands over its chunks as character spans of the same normalised
documents and, per question, its ranked rows into that chunk list. Relevance is then computed
against the peer's own chunks (nDCG's ideal is the peer's), and the context figures walk its
ranked spans exactly as they walk a flat arm's: one scorer for every arm, whoever retrieved.

The file comes from outside this program: it is read with a size bound, and every span, row
and question id is checked before anything is scored.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluation.dataset import EvalSet
from evaluation.metrics import BUDGETS, PAGE_BUDGETS, SpanTable
from utils.bounded_read import read_bounded
from utils.errors import InputError

PEER_FORMAT = "treerag-peer-arms/1"
PEER_MAX_BYTES = 1024 * 1024 * 1024
"""A peer file for the largest shared set is tens of megabytes; a gigabyte is a mistake or an attack."""


@dataclass(frozen=True)
class PeerArm:
    name: str
    system: str
    """Who produced it (e.g. ``llamaindex``) and with which versions, for the report."""
    versions: dict[str, str]
    config: dict[str, Any]
    chunks: tuple[tuple[str, int, int], ...]
    """The peer's chunks: (doc, start_char, end_char) in the normalised document text."""
    table: SpanTable
    results: dict[str, tuple[list[int], float]]
    """Question id -> (ranked rows into ``chunks``, retrieval latency in ms)."""

    def spans(self, rows: list[int]) -> list[list[Any]]:
        return [list(self.chunks[r]) for r in rows]

    def contexts(self, rows: list[int]) -> dict[str, list[list[Any]]]:
        """No context step: the answer step would read the ranked chunks in rank order."""
        ranked = self.spans(rows)
        return {str(b): ranked for b in sorted(set(BUDGETS) | set(PAGE_BUDGETS))}


def read_peer_file(path: Path) -> dict[str, Any]:
    """The file's JSON, read through the bounded reader, if it is a peer file with arms.

    Called before the evaluation index is built, so a wrong file fails in a second, not after a
    build of many minutes.
    """
    data = read_bounded(path, limit=PEER_MAX_BYTES, what=f"--peer {path}", setting="peer file size")
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise InputError(f"--peer {path}: not a JSON file ({str(exc).splitlines()[0][:120]})") from None
    if not isinstance(obj, dict) or obj.get("format") != PEER_FORMAT:
        raise InputError(f"--peer {path}: not a peer file (want format {PEER_FORMAT!r})")
    if not isinstance(obj.get("arms"), list) or not obj["arms"]:
        raise InputError(f"--peer {path}: no arms")
    return obj


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def load_peer_arms(path: Path, eval_set: EvalSet, question_ids: list[str],
                   taken: set[str], obj: dict[str, Any] | None = None) -> list[PeerArm]:
    """The peer file's arms, checked against the set's documents and the questions being scored.

    ``taken``: arm names already in the run (a peer arm may not shadow one). ``obj``: the file as
    ``read_peer_file`` returned it (read here when not given).
    """
    obj = read_peer_file(path) if obj is None else obj
    where = f"--peer {path}"
    texts = {d.path: len(d.text) for d in eval_set.documents}
    arms_raw = obj["arms"]
    system = str(obj.get("peer") or "peer")
    versions = {str(k): str(v) for k, v in (obj.get("versions") or {}).items()} \
        if isinstance(obj.get("versions"), dict) else {}
    out: list[PeerArm] = []
    for a in arms_raw:
        if not isinstance(a, dict) or not isinstance(a.get("name"), str) or not a["name"].strip():
            raise InputError(f"{where}: an arm without a name")
        name = a["name"].strip()
        if name in taken:
            raise InputError(f"{where}: arm name {name!r} is already used in this run")
        taken.add(name)
        chunks: list[tuple[str, int, int]] = []
        for c in a.get("chunks") or []:
            if not (isinstance(c, list) and len(c) == 3 and isinstance(c[0], str) and _int(c[1]) and _int(c[2])):
                raise InputError(f"{where}: arm {name}: a chunk is not [doc, start, end]")
            doc, s, e = c
            if doc not in texts:
                raise InputError(f"{where}: arm {name}: chunk of {doc!r}, which is not in this set's docs/")
            if not 0 <= s < e <= texts[doc]:
                raise InputError(f"{where}: arm {name}: chunk span [{s}, {e}) is outside {doc!r}")
            chunks.append((doc, s, e))
        results_raw = a.get("results")
        if not isinstance(results_raw, dict):
            raise InputError(f"{where}: arm {name}: no results")
        results: dict[str, tuple[list[int], float]] = {}
        for qid in question_ids:
            r = results_raw.get(qid)
            if not isinstance(r, dict) or not isinstance(r.get("rows"), list):
                raise InputError(f"{where}: arm {name} has no result for question {qid!r} "
                                 "(was it run on the same set and sample?)")
            rows = r["rows"]
            if not all(_int(x) and 0 <= x < len(chunks) for x in rows):
                raise InputError(f"{where}: arm {name}, question {qid!r}: a row is not a chunk index")
            ms = r.get("latency_ms", 0.0)
            if not isinstance(ms, (int, float)) or isinstance(ms, bool) or not 0 <= ms < 1e9:
                raise InputError(f"{where}: arm {name}, question {qid!r}: bad latency_ms")
            results[qid] = (list(dict.fromkeys(rows)), float(ms))
        config = a.get("config") if isinstance(a.get("config"), dict) else {}
        table = SpanTable.build(chunks, ())
        out.append(PeerArm(name=name, system=system, versions=versions, config=config,
                           chunks=tuple(chunks), table=table, results=results))
    return out
