"""evaluation/tools/context_spend.py: every character the context reads is put in exactly one class."""
from __future__ import annotations

from config import Config
from indexing.embedders.factory import make_embedder
from retrieval.context_assembly import assemble_context
from retrieval.types import RetrievedChunk
from evaluation.tools import context_spend as spend

LAW = """# 示例法

## 第一章 总则

第一条 为了规范船舶登记，制定本法。

第二条 本法所称船舶，是指各类机动和非机动船只。

第三条 船舶所有人应当依法办理登记手续。

## 第二章 罚则

第四条 违反本法规定的，由主管部门责令改正。

第五条 伪造船舶证书的，处五万元以下罚款。

第六条 本法自公布之日起施行。
"""


def test_the_characters_read_are_classed_paragraph_by_paragraph(tmp_path) -> None:
    from indexing.index_builder import build_index
    from indexing.index_store import load_index

    doc = tmp_path / "law.md"
    doc.write_text(LAW, encoding="utf-8")
    build_index(doc, tmp_path / "idx", Config(), make_embedder("hash", Config()))
    index = load_index(tmp_path / "idx")
    assert len(index.chunks) == 2, "each chapter one packed chunk of three articles"
    first, second = index.chunks
    pool = [RetrievedChunk(first, 1.0, {}, row=0, source="tree"), RetrievedChunk(second, 0.9, {}, row=1, source="net")]
    passages = assemble_context(index, pool, 6000).passages
    text = LAW
    evidence_at = text.index("第五条")
    evidence = {first.doc_path: [(evidence_at, text.index("\n", evidence_at))]}
    weights = spend.question_weights(index, ["办理登记手续"])
    out = spend.classify_characters(index, passages, pool, evidence, weights)

    def length(article: str) -> int:
        a = text.index(article)
        return text.index("\n", a) - a

    assert out["evidence"] == length("第五条")
    assert out["beside evidence in its hit"] == length("第四条") + length("第六条")
    # the first hit holds no evidence: the article with the question's words, and the two packed beside it
    assert out["in a hit holding no evidence (a located leaf's): with the question's words"] == length("第三条")
    assert out["in a hit holding no evidence (a located leaf's): packed beside those"] == \
        length("第一条") + length("第二条")
    # every character of every paragraph read is in exactly one class (blank lines between are not text)
    read = sum(len(p.text.replace("\n", "")) for p in passages)
    assert sum(out.values()) == read
