"""Query with default --llm-timeout/--llm-budget against a silent, a dripping and a Retry-After: 3600 server.

Run: python benchmarks/probe_llm_budget.py INDEX_DIR   (stub servers on 127.0.0.1; ~65 s, the default budget)
"""
import json, sys, tempfile, time, threading
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.conftest import run_cli
from tests.stub_servers import StubServer, StubResponse, openai_chat_body

cases = {
    "silent": StubResponse(200, openai_chat_body("late"), delay=600),
    "drip-1B/2s": StubResponse(200, openai_chat_body("x" * 200), drip=2.0),
    "retry-after-3600": StubResponse(503, {"error": {"message": "busy"}}, headers={"Retry-After": "3600"}),
}
out = {}
def run(name, resp):
    with StubServer(default=resp) as srv:
        env = {"OPENAI_API_KEY": "sk", "OPENAI_BASE_URL": srv.url + "/v1", "TREERAG_CACHE_DIR": tempfile.mkdtemp()}
        t0 = time.monotonic()
        p = run_cli("query", "--index", sys.argv[1], "--query", "How many epochs?", "--llm", "openai", "--json",
                    "--no-cache", "--no-log", env=env, timeout=300,
                    fresh_process=True)  # three at once: run_cli in-process would share one environment
        el = time.monotonic() - t0
        res = json.loads(p.stdout) if p.returncode == 0 else {}
        out[name] = (p.returncode, round(el, 1), srv.request_count, [f["step"] for f in res.get("fallbacks", [])],
                     "Traceback" in p.stderr)
ts = [threading.Thread(target=run, args=kv) for kv in cases.items()]
[t.start() for t in ts]; [t.join() for t in ts]
for k, v in out.items():
    print(f"{k}: rc={v[0]} elapsed={v[1]} s requests={v[2]} fallbacks={v[3]} traceback={v[4]}")
