"""Embedders behind one interface.

CONTRACT (implementation pending):

class Embedder(Protocol):
    name: str        # "hash" | "local" | "onnx" | "openai" | "use" ...
    model_id: str    # recorded in the index; querying with another is refused
    dim: int
    def embed_documents(self, texts: list[str]) -> np.ndarray  # (n, dim) float32, L2-normalised
    def embed_query(self, text: str) -> np.ndarray             # (dim,) float32, L2-normalised

def make_embedder(name: str, config: Config) -> Embedder   # lazy: no model loads until first embed
"""
