"""An index whose chunks, leaves and section texts live in seekdb or OceanBase (``--store seekdb://...``).

Why an engine: one machine's files stop scaling somewhere past ten thousand
documents; seekdb runs embedded in this process (``seekdb:///abs/path``) or as a
server, and OceanBase speaks the same protocol across machines
(``seekdb://USER[:PASS]@HOST:PORT/DATABASE``). The index directory then keeps a
small manifest: metadata.json (the store URI without its password, the table
prefix, counts, documents, settings) and the tree's structure arrays
(node_table.npy, node_toc_tokens.npy, leaf_chunks.npy: a few MB at 10,000
documents). Everything that grows with the text is in four tables:

    <prefix>_chunks  row, leaf, doc, body (FULLTEXT), record (JSON), tkey, emb VECTOR (HNSW, cosine)
    <prefix>_leaves  leaf, doc, body (FULLTEXT), tkey, emb VECTOR (HNSW, cosine)
    <prefix>_nodes   row, record (JSON), content
    <prefix>_terms   term, df          (the relevance floor's IDF)

How retrieval runs on it (``SeekdbSearch``): a leaf or a document is scored
exactly by a metadata filter (``WHERE leaf = ?`` / ``WHERE doc = ?``) with the
engine computing every row's inner product and full-text relevance; a larger
scope (the whole collection) by the engine's approximate kNN and full-text
top-N, the union of both candidate lists re-scored exactly. The ``body``
columns hold TreeRAG's own tokens (jieba for Chinese, the same stop words),
indexed with the engine's ``space`` parser, so the engine matches the words
TreeRAG's BM25 matches; its relevance formula and statistics are its own.

A build writes the file index to a staging directory as usual (the same code,
the same incremental reuse), copies it into new tables, swaps the manifest in
atomically and only then drops the previous tables: a failed build leaves the
previous index usable. A password comes from TREERAG_SEEKDB_PASSWORD (or the
URI) and is never written to disk.
"""

