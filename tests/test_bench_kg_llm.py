"""The local-model graph benchmark's own parts: the OpenAI-compatible server it puts in front of
the model (spoken to by TreeRAG's real OpenAI client), its question rule and its reply tally.

The model itself is not loaded here (it is a 1 GB download and minutes of CPU per reply); a
scripted stand-in answers in its place, so what is checked is the wire format the index build
depends on.
"""
from __future__ import annotations

import json
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import load_benchmark


class ScriptedModel:
    """Answers like ChatModel.complete: a fixed reply, cut at max_tokens words."""

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.calls: list[dict[str, Any]] = []

    def complete(self, messages, max_tokens, temperature, json_mode):
        self.calls.append({"messages": messages, "max_tokens": max_tokens, "json_mode": json_mode})
        srv = load_benchmark("gguf_server", "tools/local_llm")
        words = self.reply.split(" ")
        text = " ".join(words[:max_tokens])
        return srv.Completion(text, 17, min(len(words), max_tokens),
                              "length" if len(words) >= max_tokens else "stop", 0.1, 0.2)


@pytest.fixture()
def server(tmp_path: Path):
    mod = load_benchmark("gguf_server", "tools/local_llm")
    model = ScriptedModel('{"entities": [{"name": "ZetaCorpus", "type": "entity"}], "relations": []}')

    class H(mod.Handler):
        pass

    H.model, H.alias, H.default_max_tokens, H.reply_log = model, "qwen", 50, str(tmp_path / "replies.jsonl")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", model, tmp_path / "replies.jsonl"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_gguf_server_speaks_what_treerags_openai_client_sends(server, tmp_path: Path) -> None:
    import urllib.error
    import urllib.request

    from utils.llm.factory import make_llm

    url, model, replies = server
    llm = make_llm("openai:qwen", {"OPENAI_BASE_URL": url}, cache_dir=None, use_cache=False, timeout=30)
    resp = llm.generate("extract", json_mode=True, max_tokens=400, system="only JSON")
    assert json.loads(resp.text)["entities"][0]["name"] == "ZetaCorpus"
    assert resp.usage.input_tokens == 17 and resp.usage.output_tokens == 7
    call = model.calls[0]
    assert call["json_mode"] and call["max_tokens"] == 50  # the server's cap wins over the client's ask
    assert [m["role"] for m in call["messages"]] == ["system", "user"]
    logged = json.loads(replies.read_text().splitlines()[0])
    assert logged["text"] == resp.text and logged["finish_reason"] == "stop" and logged["max_tokens"] == 50
    with urllib.request.urlopen(url + "/models") as r:
        assert json.load(r)["data"][0]["id"] == "qwen"
    for path, body, code in (("/chat/completions", {"messages": [], "stream": True}, 400),
                             ("/chat/completions", {"prompt": "x"}, 400), ("/completions", {"x": 1}, 404)):
        req = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req)
        assert e.value.code == code


def test_reply_tally_tells_clean_repaired_and_unusable(tmp_path: Path) -> None:
    bench = load_benchmark("bench_kg_llm", "tools/local_llm")
    log = tmp_path / "replies.jsonl"
    rows = [('{"entities": [{"name": "A"}], "relations": []}', "stop"),
            ('Here it is: {"entities": [{"name": "A"}, {"name": "B"}]}', "stop"),
            ('{"entities": [{"name": "A"}, {"name": "B", "ty', "length"),
            ("no JSON at all", "stop")]
    log.write_text("".join(json.dumps({"text": t, "finish_reason": f, "prompt_tokens": 10, "completion_tokens": 5,
                                       "total_s": 1.5}) + "\n" for t, f in rows))
    out = bench.classify_replies(log)
    assert (out["replies"], out["clean"], out["repaired"], out["unusable"]) == (4, 1, 2, 1)
    assert out["hit_token_cap"] == 1 and out["prompt_tokens"] == 40 and out["entities"] == 4


def test_question_rule_takes_long_leaf_questions_of_cheap_papers_only(tmp_path: Path) -> None:
    bench = load_benchmark("bench_kg_llm", "tools/local_llm")
    docs = tmp_path / "set" / "docs"
    docs.mkdir(parents=True)
    para = "The model reads sentence number {i} of the corpus with care. "
    long_text = "".join(para.format(i=i) for i in range(70))  # ~4,300 characters: a long leaf
    huge_text = long_text * 3  # over --paper-chars
    qa = []
    for name, body, n_q in (("a.md", long_text, 2), ("b.md", huge_text, 3), ("c.md", long_text, 1)):
        (docs / name).write_text(f"# Paper {name}\n\n## Intro\n\nShort intro.\n\n## Method\n\n{body}\n",
                                 encoding="utf-8")
        for k in range(n_q):
            ev = body[100 * k: 100 * k + 60]
            qa.append({"id": f"{name}-{k}", "query": "q?", "lang": "en", "scope": [name],
                       "evidence": [{"doc": name, "text": ev}]})
    qa.append({"id": "a.md-short", "query": "q?", "lang": "en", "scope": ["a.md"],
               "evidence": [{"doc": "a.md", "text": "Short intro."}]})
    (tmp_path / "set" / "qa.jsonl").write_text("".join(json.dumps(q) + "\n" for q in qa), encoding="utf-8")
    sel = bench.select_questions(tmp_path / "set", 2, 5000)
    assert sel.papers == ["a.md"] and sorted(sel.questions) == ["a.md-0", "a.md-1"]  # most questions per char
    sel = bench.select_questions(tmp_path / "set", 3, 5000)
    assert sel.papers == ["a.md", "c.md"] and "b.md-0" not in sel.questions and "a.md-short" not in sel.questions
    with pytest.raises(bench.BenchError):
        bench.select_questions(tmp_path / "set", 10, 5000)
    bench.write_cut_set(tmp_path / "set", sel, tmp_path / "cut")
    assert sorted(p.name for p in (tmp_path / "cut" / "docs").iterdir()) == ["a.md", "c.md"]
    assert len((tmp_path / "cut" / "qa.jsonl").read_text().splitlines()) == 3
