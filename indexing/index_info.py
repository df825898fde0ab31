"""What an index holds and how it was built (``main.py info``), read from its metadata and a listing of
its directory: nothing is loaded, so it is instant at any size."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def index_info(path: Path) -> dict[str, Any]:
    """What an index holds and how it was built, from its metadata and a listing of its directory
    (nothing is loaded, so it is instant at any size)."""
    from indexing.index_store import read_metadata
    from indexing.embedders.floors import recorded_floor
    from utils.secrets import redact_secrets

    meta = read_metadata(path)
    counts = meta["counts"]
    files = 0
    size = 0
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.is_file(follow_symlinks=False):
                files += 1
                size += entry.stat(follow_symlinks=False).st_size
    kinds: dict[str, int] = {}
    for d in meta["documents"]:
        kinds[str(d.get("kind", "md"))] = kinds.get(str(d.get("kind", "md")), 0) + 1
    store = meta.get("store")
    return {
        "path": str(path),
        "documents": counts["documents"],
        "document_kinds": kinds,
        "document_paths": [d["path"] for d in meta["documents"]],
        "embedder": dict(meta["embedder"]),
        "embedder_reason": meta.get("embedder_reason"),
        "relevance_floor": recorded_floor(meta).to_dict(),
        "counts": {k: counts.get(k) for k in ("nodes", "leaves", "chunks", "vocabulary") if k in counts},
        "build_id": meta["build_id"],
        "created_at": meta.get("created_at"),
        "build_seconds": meta.get("build_seconds"),
        "store": ({"kind": "seekdb", "uri": redact_secrets(str(store.get("uri"))), "prefix": store.get("prefix")}
                  if isinstance(store, dict) else {"kind": "files"}),
        "disk": {"files": files, "bytes": size},
        "kg": meta.get("kg") if isinstance(meta.get("kg"), dict) else {"mode": "off"},
        "segments": _segments_info(meta),
    }


def _segments_info(meta: dict[str, Any]) -> dict[str, Any]:
    """A segmented index's deltas and deleted documents (indexing/delta_update.py); 0 and 0 when fully built."""
    seg = meta.get("segments")
    if not isinstance(seg, dict):
        return {"deltas": 0, "deleted_documents": 0}
    parts = seg.get("segments") if isinstance(seg.get("segments"), list) else []
    deleted = seg.get("deleted") if isinstance(seg.get("deleted"), list) else []
    return {"deltas": max(len(parts) - 1, 0), "deleted_documents": len(deleted), "updated_at": meta.get("updated_at")}


def _megabytes(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 100_000 else f"{n / 1e3:.1f} kB"


def _floor_line(floor: dict[str, Any] | None) -> str:
    """Where "not in these documents" starts, and whose calibration set it."""
    if not floor:
        return "floor:      unknown"
    source = str(floor.get("source", ""))
    why = {"fallback": "the default for models not calibrated here", "config": "set in the config",
           "index": "recorded in the index"}.get(source, source.replace("calibrated:", "calibrated for ", 1))
    return f"floor:      {floor.get('statistic')} >= {floor.get('value')} ({why})"


def render_info(info: dict[str, Any]) -> str:
    emb = info["embedder"]
    c = info["counts"]
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(info["document_kinds"].items()))
    store = info["store"]
    lines = [
        f"index:      {info['path']}",
        f"documents:  {info['documents']} ({kinds})" if kinds else f"documents:  {info['documents']}",
        f"embedder:   {emb.get('name')} ({emb.get('model_id')}, dim {emb.get('dim')})"
        + (f"; {info['embedder_reason']}" if info.get("embedder_reason") else ""),
        _floor_line(info.get("relevance_floor")),
        f"chunks:     {c.get('chunks')} in {c.get('leaves')} leaves of {c.get('nodes')} nodes"
        + (f"; vocabulary {c['vocabulary']:,} terms" if isinstance(c.get("vocabulary"), int) else ""),
        f"build:      {info['build_id']}" + (f", {info['created_at']}" if info.get("created_at") else "")
        + (f", {info['build_seconds']:.1f} s" if isinstance(info.get("build_seconds"), (int, float)) else ""),
        "store:      " + ("files" if store["kind"] == "files" else f"seekdb {store['uri']} (tables {store['prefix']}_*)"),
        f"on disk:    {_megabytes(info['disk']['bytes'])} in {info['disk']['files']} files"
        + ("" if store["kind"] == "files" else " (the engine's tables not counted)"),
    ]
    seg = info.get("segments") or {}
    if seg.get("deltas") or seg.get("deleted_documents"):
        lines.append(f"updates:    {seg['deltas']} delta segment(s), {seg['deleted_documents']} replaced or removed "
                     f"document(s) deleted" + (f", last {seg['updated_at']}" if seg.get("updated_at") else "")
                     + "; index --compact merges them")
    kg = info.get("kg")
    if isinstance(kg, dict) and kg.get("mode", "off") != "off":
        from indexing.kg_graph import GraphStats

        lines.append(f"graphs:     {GraphStats.from_dict(kg).line()}")
    return "\n".join(lines)
