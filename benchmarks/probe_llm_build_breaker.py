"""index --summaries llm (default flags) against a server answering 500 / 401 / an HTML page: requests and time.

Run: python benchmarks/probe_llm_build_breaker.py   (stub servers on 127.0.0.1; ~15 s)
"""
import sys, tempfile, time, threading
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.conftest import run_cli
from tests.stub_servers import StubServer, StubResponse

work = Path(tempfile.mkdtemp(prefix="treerag-breaker-"))
corpus = work / "corpus"
if not corpus.exists():
    corpus.mkdir()
    words = "venue router latency spread regime market order fill slippage desk".split()
    for d in range(20):
        lines = [f"# Report {d}", ""]
        for sec in range(4):
            lines += [f"## Section {sec}", "", " ".join(words[(i * 7 + d + sec) % 10] for i in range(320)), ""]
        (corpus / f"r{d:02d}.md").write_text("\n".join(lines))
cases = {"500": StubResponse(500, {"error": {"message": "boom"}}), "401": StubResponse(401, {"error": {"message": "bad key"}}),
         "html-200": StubResponse(200, "<html>502 Bad Gateway</html>")}
out = {}
def run(name, resp):
    with StubServer(default=resp) as srv:
        env = {"OPENAI_API_KEY": "sk", "OPENAI_BASE_URL": srv.url + "/v1", "TREERAG_CACHE_DIR": tempfile.mkdtemp()}
        t0 = time.monotonic()
        p = run_cli("index", "--input", str(corpus), "--output", str(work / f"index-{name}"), "--mock", "--summaries", "llm",
                    "--llm", "openai", "--quiet", "--no-cache", env=env, timeout=600)
        out[name] = (p.returncode, round(time.monotonic() - t0, 1), srv.request_count, "Traceback" in p.stderr,
                     [l for l in p.stdout.splitlines() if l.startswith("summaries")])
ts = [threading.Thread(target=run, args=kv) for kv in cases.items()]
[t.start() for t in ts]; [t.join() for t in ts]
for k, v in out.items():
    print(f"{k}: rc={v[0]} elapsed={v[1]} s requests={v[2]} traceback={v[3]} {v[4]}")
