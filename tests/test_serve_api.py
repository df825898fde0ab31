"""``main.py serve`` tested as a client sees it: a real server process on a free 127.0.0.1 port,
real HTTP. The query record must be exactly ``query --json``'s, the steps must stream in order,
a rebuilt index must be picked up without any request mixing two builds, and every refusal must
be JSON with one message."""
from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT, TEST_PAPER, run_cli
from tests.serve_process import running_server

EPOCHS = "How many epochs was the model trained for?"
VOLATILE = ("run_id", "created_at", "timing_ms", "logged")


@pytest.fixture(scope="module")
def server(paper_index_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    log = tmp_path_factory.mktemp("serve") / "runs.sqlite3"
    with running_server("--index", str(paper_index_dir), "--log", str(log)) as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server):
    with httpx.Client(base_url=server.url, timeout=120) as c:
        yield c


def _events(text: str) -> list[tuple[str, Any]]:
    out = []
    for block in text.split("\n\n"):
        name, data = None, None
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
        if name:
            out.append((name, data))
    return out


def _stable(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in VOLATILE}


def test_query_returns_exactly_what_query_json_prints(client, paper_index_dir: Path) -> None:
    r = client.post("/api/query", json={"question": EPOCHS})
    assert r.status_code == 200, r.text
    served = r.json()
    cli = run_cli("query", "--index", str(paper_index_dir), "--query", EPOCHS, "--json", "--no-log")
    assert cli.returncode == 0, cli.stderr
    printed = json.loads(cli.stdout)
    assert list(served) == list(printed)  # same keys in the same order
    assert served["index"]["path"] == paper_index_dir.name  # the server's file system is not told
    printed["index"]["path"] = paper_index_dir.name
    assert _stable(served) == _stable(printed)
    assert "50 epochs" in served["answer"]
    assert served["logged"] is True  # the server logs to its run log


def test_the_steps_stream_in_order_and_end_with_the_record(client) -> None:
    r = client.post("/api/query/stream", json={"question": EPOCHS, "top_k": 3})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    events = _events(r.text)
    names = [n for n, _ in events]
    assert names == ["start", "step1", "step2", "context", "answer", "result"]
    parts = dict(events)
    record = parts["result"]
    assert parts["start"]["build_id"] == record["index"]["build_id"]
    assert parts["step1"]["step1_nodes"] == record["step1_nodes"]
    assert parts["step2"]["step2_retrieved"] == record["step2_retrieved"]
    assert len(record["step2_retrieved"]) == 3  # top_k applied
    assert parts["context"]["context"] == record["context"]
    assert parts["answer"]["answer"] == record["answer"] and "50 epochs" in record["answer"]


def test_search_is_steps_one_and_two_only(client) -> None:
    r = client.post("/api/search", json={"question": EPOCHS, "top_k": 4, "llm": False})
    assert r.status_code == 200, r.text
    body = r.json()
    assert "answer" not in body and "context" not in body
    assert len(body["step2_retrieved"]) == 4 and body["step1_nodes"]
    assert any("50 epochs" in h["text"] for h in body["step2_retrieved"])


def test_documents_tree_sections_and_passages(client) -> None:
    docs = client.get("/api/documents").json()
    assert [d["path"] for d in docs["documents"]] == ["test_paper.md"]
    tree = client.get("/api/tree").json()["nodes"]
    assert any(n["heading"] == "3 Methods" for n in tree)
    by_node = client.get("/api/tree", params={"node": "0011"}).json()["nodes"]
    assert by_node == tree  # the tree of the document holding node 0011

    sec = client.get("/api/sections", params={"heading_path": "3 methods > 3.3 training procedure"}).json()
    assert sec["heading"] == "3.3 Training Procedure" and "50 epochs" in sec["text"]
    assert sec["citation"].startswith("test_paper.md:L")
    assert client.get(f"/api/sections/{sec['node_id']}").json()["text"] == sec["text"]

    hits = client.post("/api/search", json={"question": EPOCHS, "llm": False}).json()["step2_retrieved"]
    hit = next(h for h in hits if "50 epochs" in h["text"])
    p = client.get(f"/api/passages/{hit['chunk_id']}").json()
    a, b = p["highlight"]
    assert p["section"]["text"][a:b] == hit["text"]  # the passage, highlighted inside its section
    assert p["citation"] == hit["citation"]


def test_runs_are_listed_and_read_back(client) -> None:
    record = client.post("/api/query", json={"question": "What is AdaRouter's accuracy on EUR/USD?"}).json()
    runs = client.get("/api/runs", params={"limit": 5}).json()["runs"]
    assert runs[0]["run_id"] == record["run_id"]
    again = client.get(f"/api/runs/{record['run_id']}").json()
    assert again["answer"] == record["answer"] and again["step2_retrieved"] == record["step2_retrieved"]
    assert client.get("/api/runs/ffffffffffff").status_code == 404


@pytest.mark.parametrize("body, status, words", [
    ({"question": ""}, 400, "non-empty"),
    ({"question": "x" * 2001}, 413, "limit is 2,000"),
    ({"question": "q", "top_k": 0}, 400, "top_k"),
    ({"question": "q", "documents": ["nope.md"]}, 400, "not a document"),
    ({"question": "q", "llm": "yes"}, 400, "llm must be"),
    ({"query": "q"}, 400, "unknown field"),
    ([1, 2], 400, "JSON object"),
])
def test_bad_requests_are_one_json_message(client, body, status, words) -> None:
    r = client.post("/api/query", json=body)
    assert r.status_code == status
    assert list(r.json()) == ["error"] and words in r.json()["error"]


def test_other_refusals_are_json_too(client) -> None:
    r = client.post("/api/query", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json() == {"error": "the body is not valid JSON"}
    as_json = {"content-type": "application/json"}
    r = client.post("/api/query", content=b"{" + b" " * 70_000 + b"}", headers=as_json)
    assert r.status_code == 413 and "limit" in r.json()["error"]

    def chunked():  # no Content-Length: counted as it is read
        for _ in range(80):
            yield b" " * 1000
    r = client.post("/api/query", content=chunked(), headers=as_json)
    assert r.status_code == 413 and "limit" in r.json()["error"]
    for path in ("/api/nope", "/api/passages/0011_chunk_99", "/api/sections/9999"):
        r = client.get(path)
        assert r.status_code == 404 and list(r.json()) == ["error"]
    assert client.get("/api/query").status_code == 405
    assert "traceback" not in client.get("/api/sections", params={"heading_path": "nope"}).text.lower()


def test_no_cors_unless_configured(client) -> None:
    r = client.options("/api/query", headers={"origin": "http://evil.test", "access-control-request-method": "POST"})
    assert "access-control-allow-origin" not in r.headers


def test_openapi_and_the_offline_page(client) -> None:
    schema = client.get("/openapi.json").json()
    assert {"/api/query", "/api/query/stream", "/api/search", "/api/passages/{chunk_id}"} <= set(schema["paths"])
    jsonschema = pytest.importorskip("jsonschema")
    record = client.post("/api/query", json={"question": EPOCHS, "top_k": 2}).json()
    jsonschema.validate(record, schema["components"]["schemas"]["QueryRecord"])  # the record is what it says
    assert record["record_version"] == 2 and record["index"]["build_settings"]["config"]["chunk_size"]
    logged = client.get(f"/api/runs/{record['run_id']}").json()
    jsonschema.validate(logged, schema["components"]["schemas"]["QueryRecord"])
    page = client.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    for asset in ("/", "/static/app.js", "/static/style.css"):
        text = client.get(asset).text
        assert "http://" not in text and "https://" not in text, asset  # nothing fetched from elsewhere


# --------------------------------------------------------------------------- hot reload

def test_a_rebuilt_index_is_picked_up_and_no_request_mixes_builds(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(TEST_PAPER, docs / "paper.md")
    index = tmp_path / "index"
    assert run_cli("index", "--input", str(docs), "--output", str(index), "--mock", "--quiet").returncode == 0
    marker = "ZEBRAFINCH"
    question = "How many epochs was the model trained for?"
    with running_server("--index", str(index), "--no-log") as srv, httpx.Client(base_url=srv.url, timeout=120) as c:
        first = c.get("/api/health").json()["build_id"]
        seen: list[dict[str, Any]] = []
        stop = threading.Event()

        def ask_forever() -> None:
            while not stop.is_set():
                r = c.post("/api/search", json={"question": question + " " + marker, "top_k": 20, "llm": False})
                assert r.status_code == 200, r.text
                seen.append(r.json())

        askers = [threading.Thread(target=ask_forever) for _ in range(2)]
        for t in askers:
            t.start()
        try:
            deadline = time.monotonic() + 120
            while not seen and time.monotonic() < deadline:  # the old build has answered before it is replaced
                time.sleep(0.05)
            (docs / "zebra.md").write_text(f"# Zebra finches\n\n{marker} {marker}: the finches trained for 99 epochs.\n",
                                           encoding="utf-8")
            assert run_cli("index", "--input", str(docs), "--output", str(index), "--mock", "--quiet").returncode == 0
            deadline = time.monotonic() + 120
            while c.get("/api/health").json()["build_id"] == first and time.monotonic() < deadline:
                time.sleep(0.2)
            n = len(seen)
            while len(seen) < n + 2 and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            stop.set()
            for t in askers:
                t.join(timeout=120)
        health = c.get("/api/health").json()
        assert health["build_id"] != first and health["reloads"] == 1
        docs_now = [d["path"] for d in c.get("/api/documents").json()["documents"]]
        assert docs_now == ["paper.md", "zebra.md"]
        builds = {r["index"]["build_id"] for r in seen}
        assert builds == {first, health["build_id"]}
        for r in seen:  # each answer is wholly of one build: the new document only in the new build
            has_zebra = any(h["doc_path"] == "zebra.md" for h in r["step2_retrieved"])
            assert has_zebra == (r["index"]["build_id"] != first)

        # a rebuild that cannot be loaded (here: a metadata file cut short) leaves the last good build answering
        (index / "metadata.json").write_text("{", encoding="utf-8")
        r = c.post("/api/query", json={"question": question, "llm": False})
        assert r.status_code == 200 and r.json()["index"]["build_id"] == health["build_id"]
        assert c.get("/api/health").json()["reloads"] == 1
        assert "could not be loaded" in srv.output() and "still answering from build" in srv.output()


# --------------------------------------------------------------------------- safety

def test_listening_beyond_loopback_needs_a_token(paper_index_dir: Path) -> None:
    proc = run_cli("serve", "--index", str(paper_index_dir), "--host", "0.0.0.0", "--port", "0",
                   env={"TREERAG_SERVE_TOKEN": ""})
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: --host 0.0.0.0 listens beyond this machine: set TREERAG_SERVE_TOKEN")
    assert "Traceback" not in proc.stderr
    short = run_cli("serve", "--index", str(paper_index_dir), "--host", "0.0.0.0", env={"TREERAG_SERVE_TOKEN": "abc"})
    assert short.returncode == 2 and "too short" in short.stderr


def test_a_taken_port_is_one_error_line(paper_index_dir: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = run_cli("serve", "--index", str(paper_index_dir), "--port", str(port), "--no-log",
                       env={"TREERAG_SERVE_TOKEN": ""})
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == f"error: cannot listen on 127.0.0.1:{port}: Address already in use"


def _slow_llm(req) -> Any:
    from tests.stub_servers import StubResponse, openai_chat_body, openai_stream

    prompt = req.json()["messages"][-1]["content"]
    if "文档结构:" in prompt:  # locating: a reply the locator cannot use, at once (the hybrid fallback runs)
        return StubResponse(200, openai_chat_body("no idea"))
    if req.json().get("stream"):  # the streamed answer of /api/query/stream
        return StubResponse(200, stream=openai_stream(["It was trained ", "for 50 epochs [1]."]), delay=4)
    return StubResponse(200, openai_chat_body("It was trained for 50 epochs [1]."), delay=4)


def test_token_cors_budget_and_a_disconnect_cancels_the_query(paper_index_dir: Path, tmp_path: Path) -> None:
    from tests.stub_servers import StubServer

    token = "t0ken-" + "x" * 20
    with StubServer(_slow_llm) as llm:
        env = {"TREERAG_SERVE_TOKEN": token, "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": llm.url + "/v1",
               "TREERAG_CACHE_DIR": str(tmp_path / "cache")}
        with running_server("--index", str(paper_index_dir), "--llm", "openai:gpt-4o-mini", "--no-cache",
                            "--llm-budget", "3",
                            "--log", str(tmp_path / "runs.sqlite3"), "--cors-origin", "http://app.test",
                            env=env) as srv:
            with httpx.Client(base_url=srv.url, timeout=60) as anon:
                assert anon.get("/").status_code == 200  # the page itself is public
                for bad in ({}, {"authorization": "Bearer wrong"}, {"authorization": token}):
                    r = anon.get("/api/documents", headers=bad)
                    assert r.status_code == 401 and "bearer token" in r.json()["error"]
                assert anon.post("/mcp", json={}).status_code == 401
                pre = anon.options("/api/query", headers={"origin": "http://app.test",
                                                          "access-control-request-method": "POST",
                                                          "access-control-request-headers": "authorization"})
                assert pre.headers.get("access-control-allow-origin") == "http://app.test"
            auth = {"authorization": f"Bearer {token}"}
            with httpx.Client(base_url=srv.url, timeout=60, headers=auth) as c:
                assert c.get("/api/documents").status_code == 200
                with c.stream("POST", "/api/query/stream", json={"question": EPOCHS}) as r:
                    seen = []
                    for line in r.iter_lines():
                        if line.startswith("event: "):
                            seen.append(line[7:])
                        if seen[-1:] == ["context"]:
                            break  # leave while step 3 waits for the LLM
                assert seen == ["start", "step1", "step2", "context"]
                deadline = time.monotonic() + 60
                while c.get("/api/health").json()["queries"]["cancelled"] < 1 and time.monotonic() < deadline:
                    time.sleep(0.1)
                assert c.get("/api/health").json()["queries"]["cancelled"] == 1
                while llm.request_count < 2 and time.monotonic() < deadline:
                    time.sleep(0.1)
                assert llm.request_count >= 2  # locating, then the answer the client did not wait for
                # the same without streaming: the client gives up while step 3 waits for the LLM
                with pytest.raises(httpx.ReadTimeout):
                    c.post("/api/query", json={"question": EPOCHS}, timeout=httpx.Timeout(60, read=2))
                while c.get("/api/health").json()["queries"]["cancelled"] < 2 and time.monotonic() < deadline:
                    time.sleep(0.1)
                assert c.get("/api/health").json()["queries"]["cancelled"] == 2
                while llm.request_count < 4 and time.monotonic() < deadline:
                    time.sleep(0.1)
                time.sleep(5)  # the LLM's slow replies are over; both queries must have stopped there
                assert c.get("/api/runs").json()["runs"] == []  # never finished, never logged
                assert c.get("/api/health").json()["queries"]["done"] == 0

                # a client that waits: the per-query LLM budget (3 s) ends the slow answer, the
                # extractive answer takes over and says so
                full = c.post("/api/query", json={"question": EPOCHS}).json()
                assert any(f["step"] == "synthesis" for f in full["fallbacks"]), full["fallbacks"]
                assert "50 epochs" in full["answer"] and full["answer_mode"] == "extractive"
                assert c.get("/api/health").json()["queries"]["done"] == 1


def test_the_page_ships_in_the_package() -> None:
    import tomllib

    tool = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    assert "server" in tool["packages"]
    on_disk = {f"static/{p.name}" for p in (ROOT / "server" / "static").iterdir() if p.is_file()}
    assert set(tool["package-data"]["server"]) == on_disk


def test_the_llms_answer_streams_as_answer_delta_events_before_the_result(paper_index_dir: Path,
                                                                          tmp_path: Path) -> None:
    from tests.stub_servers import StubResponse, StubServer, openai_chat_body, openai_stream

    pieces = ["It was trained ", "for 50 epochs ", "[1]", ".\n\n训练了 50 个周期。"]
    events = openai_stream(pieces, prompt_tokens=900, completion_tokens=20)
    last_piece = next(i for i, ev in enumerate(events) if json.dumps(pieces[-1])[1:-1] in ev)
    gate = threading.Event()  # the LLM holds its last piece until the client has seen the first

    def llm_reply(req) -> StubResponse:
        if not req.json().get("stream"):  # locating (not streamed): a reply the locator cannot use
            return StubResponse(200, openai_chat_body("no idea"))
        return StubResponse(200, stream=events, stream_delay=0.05, stream_gate=(last_piece, gate))

    with StubServer(llm_reply) as llm:
        env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": llm.url + "/v1",
               "TREERAG_CACHE_DIR": str(tmp_path / "cache")}
        with running_server("--index", str(paper_index_dir), "--llm", "openai:gpt-4o-mini", "--no-log",
                            env=env) as srv, httpx.Client(base_url=srv.url, timeout=120) as c:
            seen: list[tuple[str, Any]] = []
            with c.stream("POST", "/api/query/stream", json={"question": EPOCHS}) as r:
                assert r.status_code == 200
                name = None
                for line in r.iter_lines():
                    if line.startswith("event: "):
                        name = line[7:]
                    elif line.startswith("data: ") and name:
                        seen.append((name, json.loads(line[6:])))
                        if name == "answer_delta":
                            gate.set()  # the first piece came while the LLM was still writing
            gate.set()
    names = [n for n, _ in seen]
    deltas = [d["text"] for n, d in seen if n == "answer_delta"]
    assert names[:4] == ["start", "step1", "step2", "context"]
    assert names[4:] == ["answer_delta"] * len(deltas) + ["answer", "result"]
    assert deltas == pieces
    record = dict(seen)["result"]
    assert record["answer_mode"] == "llm" and record["answer"] == "".join(pieces).strip()
    assert dict(seen)["answer"]["answer"] == record["answer"]
    assert record["usage"]["output_tokens"] >= 20
    assert not any(f["step"] == "synthesis" for f in record["fallbacks"])
