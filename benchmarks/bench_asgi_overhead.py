"""Which ASGI framework `serve` runs on: the per-request overhead of Starlette and FastAPI, measured.

Both serve the same JSON endpoint (a small body in, a ~2 kB JSON record out, the shape of a
query request) from uvicorn on 127.0.0.1; concurrent keep-alive clients post a bounded number of
requests to each, alternating rounds so the machine's load falls on both alike. The ratio is
FastAPI's mean time per request over Starlette's. A TreeRAG query costs tens to hundreds of
milliseconds, so what matters is the overhead in milliseconds, printed too.

    python benchmarks/bench_asgi_overhead.py [--requests 2000] [--clients 8] [--rounds 3]
"""

import argparse
import asyncio
import socket
import threading
import time
from typing import Any

RECORD = {"answer": "x" * 1200, "step2_retrieved": [{"rank": i, "text": "y" * 100} for i in range(5)]}


def starlette_app() -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def query(request: Request) -> JSONResponse:
        body = await request.json()
        return JSONResponse({**RECORD, "query": body["question"]})

    return Starlette(routes=[Route("/api/query", query, methods=["POST"])])


def fastapi_app() -> Any:
    from fastapi import FastAPI
    from pydantic import BaseModel

    class Ask(BaseModel):
        question: str
        top_k: int | None = None

    app = FastAPI()

    @app.post("/api/query")
    async def query(body: Ask) -> dict:
        return {**RECORD, "query": body.question}

    return app


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(app: Any) -> tuple[Any, threading.Thread, int]:
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    return server, thread, port


async def load(port: int, requests: int, clients: int) -> float:
    import httpx

    per_client = requests // clients
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
        async def one() -> None:
            for _ in range(per_client):
                r = await client.post("/api/query", json={"question": "How many epochs?"})
                r.raise_for_status()

        t = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(clients)))
        return (time.perf_counter() - t) / (per_client * clients)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    servers = {name: serve(make()) for name, make in (("starlette", starlette_app), ("fastapi", fastapi_app))}
    best: dict[str, float] = {}
    try:
        for _ in range(args.rounds):
            for name, (_, _, port) in servers.items():
                best[name] = min(best.get(name, 1e9), asyncio.run(load(port, args.requests, args.clients)))
    finally:
        for server, thread, _ in servers.values():
            server.should_exit = True
            thread.join(timeout=10)
    for name, sec in best.items():
        print(f"{name:10s} {sec * 1000:.3f} ms/request  ({1 / sec:,.0f} requests/s, best of {args.rounds} rounds)")
    print(f"fastapi/starlette time per request: {best['fastapi'] / best['starlette']:.2f}x "
          f"(+{(best['fastapi'] - best['starlette']) * 1000:.3f} ms)")


if __name__ == "__main__":
    main()
