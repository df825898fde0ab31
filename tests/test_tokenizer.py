"""BM25 tokenizer: English rules, Chinese via jieba (lazy, quiet), mixed text, stop-word-only queries.

Why jieba search mode (cut_for_search): flat BM25 over the 24,272 article
paragraphs of LeCoQA-train, 1,234 questions, measured while writing this:
search mode hit@10 0.470 / hit@100 0.698, precise mode 0.457 / 0.686 (hit@1
0.190 vs 0.203). The sub-words buy recall, which is what a first stage before
fusion and rerank needs.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from utils.cjk import CJK_LETTER

from utils.tokenizer import (EN_STOPWORDS, TOKENIZER_VERSION, ZH_STOPWORDS, estimate_tokens, is_stopword_only,
                             tokenize)

ROOT = Path(__file__).resolve().parents[1]


def test_english_lowercase_split_stopwords_and_plurals() -> None:
    assert tokenize("The Router selects the Experts") == ["router", "select", "expert"]
    assert tokenize("EUR/USD rose") == ["eur", "usd", "rose"]
    assert tokenize("studies of classes and buses") == ["study", "classe", "buse"]
    assert tokenize("analysis of this gas") == ["analysis", "gas"], "-is and short words are not stemmed"
    assert tokenize("don't") == [], "contraction parts are NLTK stop-words"
    assert tokenize("snake_case") == ["snake", "case"]


def test_numbers_stay_whole() -> None:
    assert tokenize("accuracy 73.2% on 1,000 runs, see 3.2.1.") == ["accuracy", "73.2", "1000", "run", "see", "3.2.1"]
    assert tokenize("1,2,3") == ["1", "2", "3"]
    assert tokenize("v1.5") == ["v1", "5"]


def test_fullwidth_forms_are_folded() -> None:
    assert tokenize("ＧＰＴ－４") == tokenize("GPT-4") == ["gpt", "4"]


def test_chinese_uses_jieba_search_mode_and_drops_stopwords() -> None:
    toks = tokenize("中华人民共和国刑法规定的故意伤害罪")
    assert "中华人民共和国" in toks and "人民" in toks and "刑法" in toks
    assert "的" not in toks
    assert tokenize("什么是个体工商户？") == ["个体", "工商", "商户", "工商户"]


def test_negation_and_modals_are_kept_in_chinese() -> None:
    toks = tokenize("不得 应当 没有")
    assert "不得" in toks and "应当" in toks and "没有" in toks


def test_hard_wrapped_chinese_is_rejoined() -> None:
    assert tokenize("故意\n伤害") == tokenize("故意伤害")


def test_mixed_text_run_by_run() -> None:
    toks = tokenize("AdaRouter 在 GLUE 上达到 73.2 分的准确率")
    assert toks[:1] == ["adarouter"] and "glue" in toks and "73.2" in toks and "准确率" in toks
    assert "在" not in toks and "的" not in toks


def test_non_empty_chinese_never_tokenises_to_nothing() -> None:
    assert tokenize("是的。") == ["是", "的", "是的"]
    assert tokenize("的了吗") != []


def test_punctuation_and_whitespace_only() -> None:
    assert tokenize("") == [] and tokenize("  \n\t") == [] and tokenize("，。！？…") == []
    assert tokenize("?!.,;") == []


def test_is_stopword_only() -> None:
    for text in ("", "   ", "the of and", "？？？", "的了吗", "是什么呢", "What is it?", "，。"):
        assert is_stopword_only(text), text
    for text in ("router", "什么是个体工商户", "the 73.2", "GLUE 的"):
        assert not is_stopword_only(text), text


def test_tokens_do_not_depend_on_the_process_hash_seed() -> None:
    """Indexes are built in one process and queried in another: the same text must give the same
    tokens whatever the interpreter's string-hash seed (a set's or dict's iteration order)."""
    text = "Adaptive routing 自适应路由 在 2023 年"
    code = f"from utils.tokenizer import tokenize; print(tokenize({text!r}))"
    outs = {subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert outs == {f"{tokenize(text)}\n"}


def test_stopword_sets_exported() -> None:
    assert len(EN_STOPWORDS) >= 150 and "the" in EN_STOPWORDS
    assert {"的", "了", "是", "在", "和"} <= ZH_STOPWORDS and "不" not in ZH_STOPWORDS
    assert isinstance(TOKENIZER_VERSION, str) and TOKENIZER_VERSION


def test_estimate_tokens_unchanged() -> None:
    assert estimate_tokens("中文") == 2
    assert estimate_tokens("hello world") == 3


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_jieba_is_lazy_and_quiet() -> None:
    english = _run("import sys, utils.tokenizer as t; t.tokenize('plain english text'); "
                   "print('jieba' in sys.modules)")
    assert english.returncode == 0 and english.stdout.strip() == "False"
    chinese = _run("import utils.tokenizer as t; print(t.tokenize('中文分词'))")
    assert chinese.returncode == 0, chinese.stderr
    assert "Building prefix dict" not in chinese.stderr and "Loading model" not in chinese.stderr
    assert chinese.stderr.strip() == ""


@pytest.mark.parametrize("text", ["第一百四十条 生产者、销售者在产品中掺杂、掺假", "Section 3.2: Router Design"])
def test_no_empty_strings_or_whitespace_tokens(text: str) -> None:
    toks = tokenize(text)
    assert toks and all(t and t == t.strip() for t in toks)


@pytest.mark.parametrize("terms", [[], ["123", "_"], ["abc", "42"], ["数据", "7"], ["abc", "数据"],
                                   ["数据abc", "9"], ["数据abc", "x"], ["é"], ["数据", "数据abc", "q"]])
def test_vocabulary_scripts_names_each_term_as_script_of_does(terms: list[str]) -> None:
    from utils.tokenizer import script_of, vocabulary_scripts

    assert vocabulary_scripts(terms) == frozenset(s for s in map(script_of, terms) if s)
    assert vocabulary_scripts(iter(terms)) == vocabulary_scripts(terms)


def _estimate_by_matches(text: str) -> int:
    """estimate_tokens as a walk over _WORD's matches (what the counting regexes must equal)."""
    rest = CJK_LETTER.sub(" ", text)
    words = other = 0
    for m in re.finditer(r"[A-Za-z0-9_]+|[^\sA-Za-z0-9_]", rest):
        if m.group(0)[0].isalnum() or m.group(0)[0] == "_":
            words += 1
        else:
            other += 1
    return len(CJK_LETTER.findall(text)) + int(round(words * 1.3)) + other


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab Z9_ ,.!?\n\t-éß²٣ⅫΩ中文。，ｱ🙂\u3000\u00a0")), max_size=60))
def test_estimate_tokens_counts_what_a_walk_over_the_matches_counts(text: str) -> None:
    assert estimate_tokens(text) == _estimate_by_matches(text)
