"""One LLM interface, three backends: mock, Anthropic, OpenAI(-compatible).

Why one small interface (``generate(prompt, json_mode=…) -> LLMResponse``):
the pipeline needs exactly two things from a model — JSON for node locating,
text for synthesis — and the same code must talk to Claude, GPT, DeepSeek and
any local Ollama / vLLM / llama.cpp server (``OPENAI_BASE_URL``).

Why the SDKs retry (``max_retries``, default 4) and we do not: both already
retry 408/409/429/5xx, timeouts and connection errors with exponential
backoff and honour Retry-After (``retry-after-ms``, ``retry-after``), and a
server can steer them with ``x-should-retry``. What we add around them goes
through public API only, event hooks on the SDK's own ``DefaultHttpxClient``
(``http_hooks``): the count of requests sent, a wall-clock limit on each
request, no wait for a Retry-After longer than 60 s or the budget left, and
the query's or build's deadline over everything. Never retried: other 4xx.
Every failure the user can fix surfaces as a one-line ``BackendError``
(subclass ``LLMCallError``), which the pipeline catches and records as a
fallback.

Why the SDKs are imported inside the first call: ``python main.py --help``
and mock runs must not pay for importing them (or need them installed).

Servers differ in what they accept. When a server rejects a parameter with a
400 that names it (``response_format`` on many OpenAI-compatible servers,
``temperature`` or ``max_tokens`` on newer models, assistant prefill on newer
Claude models), the client drops or renames that parameter, retries once,
remembers the choice, tells the user once through ``notice`` and lists it in
``LLMResponse.notes`` so the run record shows how the answer was obtained.

Layout (one module per seam): ``settings`` (names, defaults, environment variables), ``types`` (request,
response, usage, the ``LLMClient`` protocol), ``mock``, ``retry`` (the retry rule and error wording),
``remote`` (the providers' shared call loop), ``attempts`` and ``http_hooks`` (what the SDK's requests
did), ``openai_llm``, ``anthropic_llm``, ``cached`` (the response cache), ``factory`` (``make_llm`` and
spec parsing).
"""
