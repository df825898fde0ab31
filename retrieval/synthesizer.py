"""Step 3: answer from the evidence only, citing each claim's heading path."""
from __future__ import annotations

import re
from typing import Any

from retrieval.types import Fallback, RetrievedChunk
from utils.errors import BackendError

SYNTHESIS_PROMPT = """基于以下从文档中检索到的证据，回答用户的问题。

规则:
1. 只基于提供的证据回答，不要编造信息
2. 回答时在关键信息后标注来源，格式为 [来源: 章节路径]
3. 如果证据不足以完整回答，明确说明
4. 回答要简洁准确
5. 使用与用户问题相同的语言回答

用户问题: {query}

检索到的证据:
{context}

请回答:"""

_CJK = re.compile(r"[\u3400-\u9fff]")


def is_chinese(text: str) -> bool:
    """A question is answered in Chinese when it contains CJK characters."""
    return bool(_CJK.search(text))


def build_context(chunks: list[RetrievedChunk]) -> str:
    return "\n\n".join(f"[证据{i}] 来源: {rc.chunk.heading_path}\n{rc.chunk.text}"
                       for i, rc in enumerate(chunks, 1))


def no_evidence_answer(query: str) -> str:
    if is_chinese(query):
        return "未在文档中检索到与该问题相关的证据，无法回答。"
    return "No evidence relevant to this question was found in the documents, so it cannot be answered."


def extractive_answer(query: str, chunks: list[RetrievedChunk]) -> str:
    """The spec's mock answer: the evidence itself, each piece with its source."""
    if not chunks:
        return no_evidence_answer(query)
    head = "根据检索结果:" if is_chinese(query) else "Based on the retrieved evidence:"
    lines = [head]
    for i, rc in enumerate(chunks, 1):
        text = " ".join(rc.chunk.text.split())
        lines.append(f'[{i}] (来源: {rc.chunk.heading_path}) "{text}"')
    return "\n".join(lines)


def synthesize(query: str, chunks: list[RetrievedChunk], llm: Any, fallbacks: list[Fallback],
               usage: Any = None) -> str:
    """LLM answer over document-ordered evidence; no evidence means no LLM call.

    ``llm`` None means mock mode (extractive). An LLM failure degrades to the
    extractive answer and is recorded.
    """
    if not chunks:
        return no_evidence_answer(query)
    if llm is None:
        return extractive_answer(query, chunks)
    prompt = SYNTHESIS_PROMPT.format(query=query, context=build_context(chunks))
    try:
        resp = llm.generate(prompt, max_tokens=1024)
    except BackendError as exc:
        fallbacks.append(Fallback("synthesis", str(exc)[:500], "extractive answer"))
        return extractive_answer(query, chunks)
    if usage is not None:
        usage.add(resp.usage)
    text = (resp.text or "").strip()
    if not text:
        fallbacks.append(Fallback("synthesis", "the LLM returned an empty answer", "extractive answer"))
        return extractive_answer(query, chunks)
    return text
