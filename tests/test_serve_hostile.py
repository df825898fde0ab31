"""``main.py serve`` and ``main.py mcp`` against a hostile client or web page: where a request may
come from (Host, Origin, content type), what it may read (only the served index's runs, no server
paths, bounded trees), what it may send (surrogates, deep nesting, slow or cut-off requests, lines
of any length) and how the server answers each: one JSON message, never a traceback in its log,
never a hang. A real server process on 127.0.0.1 (or 127.0.0.2), real sockets."""
from __future__ import annotations

import json
import select
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.conftest import ROOT, run_cli
from tests.serve_process import running_server

EPOCHS = "How many epochs was the model trained for?"
JSON = {"content-type": "application/json"}
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


@pytest.fixture(scope="module")
def served(paper_index_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    log = tmp_path_factory.mktemp("hostile") / "runs.sqlite3"
    with running_server("--index", str(paper_index_dir), "--log", str(log)) as srv:
        srv.log = log  # type: ignore[attr-defined]
        yield srv


@pytest.fixture(scope="module")
def client(served):
    with httpx.Client(base_url=served.url, timeout=60) as c:
        yield c


def _port(url: str) -> int:
    return urlsplit(url).port or 80


def _no_traceback(output: str) -> None:
    assert "Traceback" not in output and "Exception in ASGI" not in output, output[-3000:]


def _error(r: httpx.Response, status: int) -> str:
    assert r.status_code == status, (r.status_code, r.text[:300])
    assert r.headers["content-type"].startswith("application/json"), r.headers
    body = r.json()
    assert list(body) == ["error"], body
    return body["error"]


def _raw(url: str, request: bytes) -> bytes:
    """Send bytes as they are (no client library fixing them up) and read the answer to the end."""
    with socket.create_connection(("127.0.0.1", _port(url)), timeout=30) as s:
        s.sendall(request)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


# --------------------------------------------------------------------------- E2: where a request comes from

@pytest.mark.parametrize("host", ["attacker.example:{port}", "evil.example.com", "127.0.0.1.evil.example",
                                  "localhost.evil.example:{port}", "rebind.attacker.test"])
def test_a_foreign_host_is_refused_421_on_loopback(served, client, host: str) -> None:
    host = host.format(port=_port(served.url))
    assert "DNS-rebinding" in _error(client.get("/api/documents", headers={"host": host}), 421)
    _error(client.post("/api/query", json={"question": EPOCHS}, headers={"host": host}), 421)
    _error(client.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "host": host}), 421)


def test_this_machines_own_names_are_served(served, client) -> None:
    port = _port(served.url)
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "localhost"):
        assert client.get("/api/health", headers={"host": host}).status_code == 200, host


def test_another_sites_page_can_neither_read_nor_ask(served, client) -> None:
    done = client.get("/api/health").json()["queries"]["done"]
    for origin in ("https://evil.example", "http://rebind.attacker.test:8765", "null"):
        assert "--cors-origin" in _error(client.post("/api/query", json={"question": EPOCHS},
                                                     headers={"origin": origin}), 403)
        _error(client.get("/api/runs", headers={"origin": origin}), 403)
        _error(client.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "origin": origin}), 403)
    assert client.get("/api/health").json()["queries"]["done"] == done  # nothing ran
    own = served.url
    assert client.post("/api/search", json={"question": EPOCHS}, headers={"origin": own}).status_code == 200


def test_a_post_not_declared_json_is_415_and_never_runs(client) -> None:
    done = client.get("/api/health").json()["queries"]["done"]
    body = json.dumps({"question": EPOCHS})
    for ctype in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None):
        headers = {"content-type": ctype} if ctype else {}
        r = client.post("/api/query", content=body, headers=headers)
        assert "application/json" in _error(r, 415)
    _error(client.post("/mcp", content=json.dumps(INITIALIZE), headers={"accept": MCP_HEADERS["accept"],
                                                                        "content-type": "text/plain"}), 415)
    assert client.get("/api/health").json()["queries"]["done"] == done
    assert client.post("/api/search", content=body, headers={"content-type": "application/json; charset=utf-8"}
                       ).status_code == 200


# --------------------------------------------------------------------------- E3: every loopback address

def test_loopback_is_all_of_127_slash_8_and_ipv6_one_and_nothing_else() -> None:
    from server.app import ServeSettings
    from server.security import loopback_address
    from utils.errors import InputError

    for host, canonical in (("127.0.0.1", "127.0.0.1"), ("127.0.0.2", "127.0.0.2"), ("127.1", "127.0.0.1"),
                            ("127.255.255.254", "127.255.255.254"), ("::1", "::1"), ("localhost", "127.0.0.1")):
        assert loopback_address(host) == canonical, host
        ServeSettings(host=host).check()  # no token needed
    for host in ("0.0.0.0", "::", "10.0.0.1", "localhost.", "::ffff:127.0.0.1", "example.com", "", "127.0.0.1 x"):
        assert loopback_address(host) is None, host
        with pytest.raises(InputError, match="TREERAG_SERVE_TOKEN"):
            ServeSettings(host=host).check()


def test_a_server_on_127_0_0_2_checks_host_and_origin_like_127_0_0_1(paper_index_dir: Path) -> None:
    with running_server("--index", str(paper_index_dir), "--host", "127.0.0.2", "--no-log") as srv:
        port = _port(srv.url)
        assert srv.url == f"http://127.0.0.2:{port}"
        with httpx.Client(base_url=srv.url, timeout=60) as c:
            foreign = {**MCP_HEADERS, "host": f"evil.example:{port}", "origin": "http://evil.example"}
            _error(c.post("/mcp", json=INITIALIZE, headers=foreign), 421)
            _error(c.get("/api/documents", headers={"host": f"evil.example:{port}"}), 421)
            _error(c.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "origin": "http://evil.example"}), 403)
            ok = c.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "origin": srv.url})
            assert ok.status_code == 200 and ok.json()["result"]["serverInfo"]["name"] == "treerag"
        _no_traceback(srv.output())


# --------------------------------------------------------------------------- E4: runs of the served index only

def test_runs_are_the_served_index_s_only_and_name_no_server_path(served, client, paper_index_dir: Path,
                                                                  tmp_path: Path) -> None:
    other = tmp_path / "other-index"
    shutil.copytree(paper_index_dir, other)
    cli = run_cli("query", "--index", str(other), "--query", "SECRET-PROJECT-X what optimizer?", "--json",
                  "--log", str(served.log))
    assert cli.returncode == 0, cli.stderr
    secret_id = json.loads(cli.stdout)["run_id"]
    mine = client.post("/api/query", json={"question": EPOCHS})
    assert mine.status_code == 200
    assert mine.json()["index"]["path"] == paper_index_dir.name
    listed = client.get("/api/runs", params={"limit": 500})
    assert "SECRET-PROJECT-X" not in listed.text and secret_id not in listed.text
    assert mine.json()["run_id"] in listed.text
    _error(client.get(f"/api/runs/{secret_id}"), 404)
    _error(client.get(f"/api/runs/{secret_id[:8]}"), 404)
    shown = client.get(f"/api/runs/{mine.json()['run_id']}")
    assert shown.status_code == 200
    for text in (mine.text, listed.text, shown.text):
        assert str(paper_index_dir) not in text and str(tmp_path) not in text
    stream = client.post("/api/query/stream", json={"question": EPOCHS})
    assert str(paper_index_dir) not in stream.text


# --------------------------------------------------------------------------- E5: a lone surrogate

def test_a_lone_surrogate_in_a_question_is_400_on_every_route(served, client) -> None:
    body = b'{"question": "epochs \\ud800"}'
    for path in ("/api/query", "/api/search", "/api/query/stream"):
        assert "not valid Unicode" in _error(client.post(path, content=body, headers=JSON), 400)
    bad_doc = b'{"question": "epochs", "documents": ["a\\udc00.md"]}'
    assert "not valid Unicode" in _error(client.post("/api/search", content=bad_doc, headers=JSON), 400)
    _no_traceback(served.output())


def _mcp_stdio(index: Path, lines: list[bytes], timeout: float = 120) -> tuple[dict[Any, list[dict]], str]:
    """Replies of ``main.py mcp`` to these lines (then EOF), by id; and its stderr."""
    proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "mcp", "--index", str(index), "--no-log"],
                          input=b"\n".join(lines) + b"\n", capture_output=True, timeout=timeout, cwd=str(ROOT))
    replies: dict[Any, list[dict]] = {}
    for line in proc.stdout.decode().splitlines():
        message = json.loads(line)  # stdout carries only protocol messages
        replies.setdefault(message.get("id"), []).append(message)
    return replies, proc.stderr.decode()


def test_mcp_stdio_answers_every_line_and_bounds_its_length(paper_index_dir: Path) -> None:
    lines = [json.dumps(INITIALIZE).encode(), b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
             b"{not json", b"\xff\xfe binary", b"[" * 50_000 + b"]" * 50_000,
             b'[{"jsonrpc":"2.0","id":5,"method":"ping"}]',
             b'{"jsonrpc":"2.0","id":24,"method":"tools/call","params":{"name":"ask",'
             b'"arguments":{"question":"epochs \\ud800"}}}',
             b"x" * 1_000_000, b'{"id":8,"method":"ping"}', b'{"jsonrpc":"2.0","id":7,"method":"ping"}']
    replies, err = _mcp_stdio(paper_index_dir, lines)
    assert replies[1][0]["result"]["serverInfo"]["name"] == "treerag"
    assert replies[7] == [{"jsonrpc": "2.0", "id": 7, "result": {}}]  # still serving after all of it
    assert "not valid Unicode" in replies[24][0]["error"]["message"]
    assert replies[8][0]["error"]["code"] == -32600
    unnamed = [r["error"] for r in replies[None]]
    assert sum(e["code"] == -32700 for e in unnamed) == 3  # not JSON, binary, nested too deep
    assert any("batches" in e["message"] for e in unnamed)
    assert any("longer than" in e["message"] for e in unnamed)  # the 1 MB line: skipped, not held
    assert "Traceback" not in err


# --------------------------------------------------------------------------- E7: deep nesting

@pytest.mark.parametrize("body", [b"[" * 30_000 + b"]" * 30_000, b'{"a":' * 10_000 + b"1" + b"}" * 10_000])
def test_json_nested_deep_under_the_body_limit_is_400(served, client, body: bytes) -> None:
    for path in ("/api/query", "/api/search", "/api/query/stream"):
        assert "not valid JSON" in _error(client.post(path, content=body, headers=JSON), 400)
    _no_traceback(served.output())


def test_a_stored_record_nested_too_deep_is_one_error_for_show_and_the_api(served, client) -> None:
    run_id = client.post("/api/query", json={"question": "what optimizer was used?"}).json()["run_id"]
    with sqlite3.connect(served.log) as conn:
        conn.execute("UPDATE runs SET result = ? WHERE run_id = ?", ("[" * 100_000 + "]" * 100_000, run_id))
    refused = _error(client.get(f"/api/runs/{run_id}"), 400)
    assert "unreadable" in refused and str(served.log.parent) not in refused  # the log named, not where it is
    shown = run_cli("show", run_id, "--log", str(served.log))
    assert shown.returncode != 0 and "Traceback" not in shown.stderr
    assert shown.stderr.strip().count("\n") == 0 and "unreadable" in shown.stderr
    _no_traceback(served.output())


# --------------------------------------------------------------------------- E8, E9: slow and vanishing clients

@pytest.fixture(scope="module")
def impatient(paper_index_dir: Path):
    with running_server("--index", str(paper_index_dir), "--no-log", "--read-timeout", "1",
                        "--cors-origin", "http://app.test", "--max-connections", "4") as srv:
        yield srv


def _closed_while_dripping(url: str, head: bytes, drip: bytes, rounds: int = 300) -> bytes:
    """Send ``head``, then ``drip`` one byte at a time (5 a second) until the server answers or
    closes; its answer (b"" for a plain close). Fails if the server holds on through every round."""
    with socket.create_connection(("127.0.0.1", _port(url)), timeout=30) as s:
        s.sendall(head)
        for i in range(rounds):
            readable, _, _ = select.select([s], [], [], 0.2)
            if readable:
                out = b""
                try:
                    while chunk := s.recv(65536):
                        out += chunk
                except ConnectionResetError:
                    pass
                return out
            try:
                s.send(drip[i % len(drip):i % len(drip) + 1])
            except (BrokenPipeError, ConnectionResetError):
                return b""
    raise AssertionError(f"the server still held the connection after {rounds} dripped bytes")


def test_dripped_headers_are_cut_off(impatient) -> None:
    out = _closed_while_dripping(impatient.url, b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ", b"a")
    assert out == b"" or out.startswith(b"HTTP/1.1 408")


def test_a_dripped_body_gets_408_as_json(impatient) -> None:
    head = (b"POST /api/query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n{")
    out = _closed_while_dripping(impatient.url, head, b" ")
    assert out.startswith(b"HTTP/1.1 408"), out[:200]
    assert json.loads(out.split(b"\r\n\r\n", 1)[1])["error"].startswith("the request body did not arrive")
    with httpx.Client(base_url=impatient.url, timeout=60) as c:  # and the server goes on serving
        assert c.post("/api/search", json={"question": EPOCHS}).status_code == 200
    _no_traceback(impatient.output())


def test_connections_beyond_the_cap_are_refused_503_as_json(impatient) -> None:
    held = [socket.create_connection(("127.0.0.1", _port(impatient.url)), timeout=30) for _ in range(7)]
    try:
        refused = []
        for s in held:
            readable, _, _ = select.select([s], [], [], 0.5)
            if readable and (data := s.recv(65536)):
                refused.append(data)
        assert len(refused) >= 3  # 7 connections, 4 allowed
        for data in refused:
            head, _, body = data.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 503") and "connections" in json.loads(body)["error"]
    finally:
        for s in held:
            s.close()


def test_get_mcp_is_405_not_a_stream_that_never_ends(client) -> None:
    r = client.get("/mcp", headers={"accept": "text/event-stream"}, timeout=30)
    assert "stateless" in _error(r, 405)


def test_a_client_that_leaves_mid_body_leaves_no_traceback(served, client) -> None:
    for path in (b"/api/query", b"/api/search", b"/mcp"):
        with socket.create_connection(("127.0.0.1", _port(served.url)), timeout=30) as s:
            s.sendall(b"POST " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      b"Accept: application/json, text/event-stream\r\n"
                      b"Content-Length: 100\r\n\r\n{\"question\": ")
    for _ in range(3):  # let the server see the three disconnects
        assert client.get("/api/health").status_code == 200
        time.sleep(0.5)
    _no_traceback(served.output())


# --------------------------------------------------------------------------- E11: retention

def test_log_max_runs_bounds_the_run_log(paper_index_dir: Path, tmp_path: Path) -> None:
    from config import Config
    from utils.errors import InputError

    log = tmp_path / "runs.sqlite3"
    ids = []
    for question in ("what optimizer?", "how many epochs?", "which dataset?"):
        r = run_cli("query", "--index", str(paper_index_dir), "--query", question, "--json", "--log", str(log),
                    "--log-max-runs", "2")
        assert r.returncode == 0, r.stderr
        ids.append(json.loads(r.stdout)["run_id"])
    listed = run_cli("history", "--log", str(log), "--limit", "10")
    assert ids[0][:8] not in listed.stdout and ids[1][:8] in listed.stdout and ids[2][:8] in listed.stdout
    assert Config().run_log_max_runs > 0  # bounded by default
    with pytest.raises(InputError, match="run_log_max_runs"):
        Config(run_log_max_runs=-1)


# --------------------------------------------------------------------------- E15: health beside busy workers

def test_health_and_reads_answer_while_every_query_worker_waits(paper_index_dir: Path, tmp_path: Path) -> None:
    from tests.stub_servers import StubResponse, StubServer, openai_chat_body

    release = threading.Event()

    def stalled(_req: Any) -> StubResponse:
        release.wait(120)  # the LLM answers only when the test says so
        return StubResponse(200, openai_chat_body("no idea"))

    with StubServer(stalled) as llm:
        env = {"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": llm.url + "/v1",
               "TREERAG_CACHE_DIR": str(tmp_path / "cache")}
        with running_server("--index", str(paper_index_dir), "--llm", "openai:gpt-4o-mini", "--no-cache",
                            "--workers", "1", "--llm-timeout", "300", "--llm-budget", "300", "--no-log",
                            env=env) as srv:
            with httpx.Client(base_url=srv.url, timeout=httpx.Timeout(300, read=30)) as c:
                asking = threading.Thread(target=lambda: httpx.post(srv.url + "/api/query", json={"question": EPOCHS},
                                                                    timeout=300))
                asking.start()
                try:
                    for _ in range(600):  # until the one worker waits on the LLM
                        if llm.request_count >= 1:
                            break
                        time.sleep(0.1)
                    assert llm.request_count >= 1
                    health = c.get("/api/health")  # read=30: on old code this waited for the LLM
                    assert health.status_code == 200 and health.json()["queries"]["running"] == 1
                    assert c.get("/api/documents").status_code == 200
                    assert c.get("/api/tree").status_code == 200
                finally:
                    release.set()
                    asking.join(300)


# --------------------------------------------------------------------------- E20, E21: every error is one short JSON line

def test_malformed_http_and_refused_preflights_are_json(served) -> None:
    for bad in (b"abc", b"-5", b"1" + b"0" * 30):
        out = _raw(served.url, b"POST /api/query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                               b"Content-Length: " + bad + b"\r\n\r\n{}")
        head, _, body = out.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400") and b"application/json" in head.lower(), out[:300]
        assert "not valid HTTP" in json.loads(body)["error"]
    with httpx.Client(base_url=served.url, timeout=60) as c:
        pre = c.options("/api/query", headers={"origin": "http://evil.test", "access-control-request-method": "POST"})
        _error(pre, 403)


def test_an_allowed_origin_reaches_mcp_too_and_cors_refusals_are_json(impatient) -> None:
    with httpx.Client(base_url=impatient.url, timeout=60) as c:
        ok = c.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "origin": "http://app.test"})
        assert ok.status_code == 200, ok.text
        assert ok.headers.get("access-control-allow-origin") == "http://app.test"
        pre = c.options("/api/query", headers={"origin": "http://app.test", "access-control-request-method": "DELETE"})
        assert "method" in _error(pre, 400).lower()


def test_huge_values_are_quoted_cut_short(client, paper_index_dir: Path) -> None:
    for r in (client.get("/api/runs/" + "x" * 5_000), client.get("/api/sections/" + "y" * 5_000),
              client.get("/api/passages/" + "p_chunk_" * 600),
              client.post("/api/search", json={"question": "q", "documents": ["z" * 5_000]})):
        assert len(r.json()["error"]) < 300, r.text[:400]
    for args in (("query", "--index", str(paper_index_dir), "--no-log", "-q", "epochs", "--doc", "a" * 10_000),
                 ("query", "--index", str(paper_index_dir), "--no-log", "-q", "epochs",
                  "--context-budget", "1" + "0" * 5_000),
                 ("show", "r" * 10_000, "--log", str(paper_index_dir / "no-such-log.sqlite3"))):
        r = run_cli(*args)
        assert r.returncode != 0 and 0 < len(r.stderr) < 400, r.stderr[:500]


# --------------------------------------------------------------------------- E22: bounded trees

def test_the_tree_is_bounded_in_nodes_and_depth_and_readable_below_any_node(client) -> None:
    whole = client.get("/api/tree").json()
    assert whole["truncated"] is False

    def count(nodes: list[dict]) -> int:
        return sum(1 + count(n["children"]) for n in nodes)

    cut = client.get("/api/tree", params={"max_nodes": 3}).json()
    assert count(cut["nodes"]) == 3 and cut["truncated"] is True
    top = client.get("/api/tree", params={"depth": 1}).json()
    assert all(n["children"] == [] for n in top["nodes"])
    parent = next(n for n in top["nodes"] if n.get("children_omitted"))
    below = client.get("/api/tree", params={"under": parent["node_id"]}).json()
    assert [n["node_id"] for n in below["nodes"]] == [parent["node_id"]]
    assert len(below["nodes"][0]["children"]) == parent["children_omitted"]
    for bad in ({"max_nodes": 0}, {"max_nodes": 10**9}, {"depth": 0}, {"max_nodes": "many"}):
        _error(client.get("/api/tree", params=bad), 400)
    _error(client.get("/api/tree", params={"under": "9999"}), 404)


def test_a_wide_tree_is_cut_breadth_first_at_the_node_cap() -> None:
    from server.service import bounded_tree
    from tree_builder.tree import TreeNode

    docs = []
    for d in range(30):
        doc = TreeNode(f"d{d}", f"doc {d}", 0, "", kind="document", doc_path=f"{d}.md")
        for s in range(200):
            child = TreeNode(f"d{d}s{s}", f"s{s}", 1, "x", parent=doc, doc_path=f"{d}.md")
            child.children = [TreeNode(f"d{d}s{s}l", "leaf", 2, "y", parent=child, doc_path=f"{d}.md")]
            doc.children.append(child)
        docs.append(doc)
    nodes, truncated, top_omitted = bounded_tree(docs, 2_000, None)
    assert truncated and top_omitted == 0
    assert len(nodes) == 30  # every document first, then their sections, as far as the cap goes
    sent = sum(1 + len(n["children"]) + sum(len(c["children"]) for c in n["children"]) for n in nodes)
    assert sent == 2_000
    assert all(c.get("children_omitted") == 1 for n in nodes for c in n["children"])
    few, truncated, top_omitted = bounded_tree(docs, 10, None)
    assert len(few) == 10 and top_omitted == 20 and truncated
