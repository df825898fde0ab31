// TreeRAG's page: ask, watch the three steps arrive, read every citation in its section.
// Plain JavaScript, no libraries: everything the page needs comes from this server.
"use strict";

const $ = (sel) => document.querySelector(sel);
const CJK = /[\u3400-\u9fff\uf900-\ufaff]/;
const state = { token: localStorage.getItem("treerag-token") || "", controller: null, result: null,
                located: new Map(), hits: new Map(), currentNode: null };

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) if (c !== null && c !== undefined) node.append(c);
  return node;
}

/** Mark text that is mostly Chinese so the browser picks a CJK face and line height for it. */
function langOf(text) { return CJK.test(text || "") ? "zh" : null; }
function textEl(tag, text, cls) { return el(tag, { class: cls, text, lang: langOf(text) }); }

function headers(json) {
  const h = {};
  if (json) h["content-type"] = "application/json";
  if (state.token) h["authorization"] = "Bearer " + state.token;
  return h;
}

async function api(path, options = {}) {
  const res = await fetch(path, { ...options, headers: headers(!!options.body) });
  if (res.status === 401) { $("#token-form").hidden = false; throw new Error("this server needs a token: enter it at the top right"); }
  const body = await res.json().catch(() => ({ error: `HTTP ${res.status}` }));
  if (!res.ok) throw new Error(body.error || `HTTP ${res.status}`);
  return body;
}

function showError(message) {
  const box = $("#error");
  box.textContent = message;
  box.hidden = !message;
}

// ------------------------------------------------------------------ index info, documents, runs

async function loadIndexInfo() {
  try {
    const [health, docs] = await Promise.all([api("/api/health"), api("/api/documents")]);
    const c = docs.counts;
    $("#index-info").textContent = `${c.documents} document${c.documents === 1 ? "" : "s"} · ${c.chunks.toLocaleString()} chunks · ` +
      `embedder ${docs.embedder.name} · LLM ${health.llm} · build ${health.build_id.slice(0, 8)}`;
    const select = $("#documents");
    select.length = 1;
    for (const d of docs.documents.slice(0, 2000)) {
      select.append(el("option", { value: d.path, text: d.title && d.title !== d.path ? `${d.path} — ${d.title}` : d.path }));
    }
    select.hidden = docs.documents.length < 2;
    if (health.llm.startsWith("none")) {  // nothing to switch: say so instead of offering a dead toggle
      $("#use-llm").checked = false;
      $("#use-llm").disabled = true;
      $("#use-llm").parentElement.title = "this server has no LLM: hybrid locating and extractive answers";
    }
  } catch (err) { $("#index-info").textContent = String(err.message || err); }
}

async function loadRuns() {
  const list = $("#runs");
  try {
    const data = await api("/api/runs?limit=12");
    list.replaceChildren();
    if (!data.logging) { list.append(el("li", { class: "placeholder", text: "this server does not record runs" })); return; }
    if (!data.runs.length) { list.append(el("li", { class: "placeholder", text: "no runs yet" })); return; }
    for (const r of data.runs) {
      list.append(el("li", { onclick: () => openRun(r.run_id), title: r.answer_excerpt },
        el("span", { class: "when", text: (r.created_at || "").replace("T", " ").slice(5, 16) }),
        textEl("span", r.query, "q"),
        el("span", { class: "score", text: r.total_ms != null ? `${Math.round(r.total_ms)} ms` : "" })));
    }
  } catch (err) { list.replaceChildren(el("li", { class: "placeholder", text: err.message })); }
}

async function openRun(runId) {
  try {
    showError("");
    const result = await api(`/api/runs/${encodeURIComponent(runId)}`);
    $("#question").value = result.query;
    resetView();
    renderResult(result);
  } catch (err) { showError(err.message); }
}

// ------------------------------------------------------------------ asking

function resetView() {
  state.result = null;
  state.located = new Map();
  state.hits = new Map();
  $("#steps").hidden = false;
  for (const li of document.querySelectorAll("#steps li")) { li.className = ""; li.querySelector(".meta").textContent = ""; }
  for (const id of ["#answer-card", "#evidence-card", "#located-card"]) $(id).hidden = true;
  $("#answer").replaceChildren();
  $("#evidence").replaceChildren();
  $("#retrieved").replaceChildren();
  showError("");
}

function stepState(step, cls, meta) {
  const li = document.querySelector(`#steps li[data-step="${step}"]`);
  if (!li) return;
  li.className = cls;
  if (meta !== undefined) li.querySelector(".meta").textContent = meta;
}

async function ask(event) {
  event.preventDefault();
  const question = $("#question").value.trim();
  if (!question) return;
  if (state.controller) state.controller.abort();  // the server stops the abandoned query
  const controller = new AbortController();
  state.controller = controller;
  const body = { question, llm: $("#use-llm").checked };
  const doc = $("#documents").value;
  if (doc) body.documents = [doc];
  const k = parseInt($("#top-k").value, 10);
  if (k > 0) body.top_k = k;
  resetView();
  stepState("step1", "running");
  $("#ask-button").disabled = true;
  try {
    const res = await fetch("/api/query/stream", { method: "POST", headers: headers(true), body: JSON.stringify(body), signal: controller.signal });
    if (res.status === 401) { $("#token-form").hidden = false; throw new Error("this server needs a token: enter it at the top right"); }
    if (!res.ok) { const e = await res.json().catch(() => ({})); throw new Error(e.error || `HTTP ${res.status}`); }
    await readEvents(res.body, onEvent);
  } catch (err) {
    if (err.name !== "AbortError") { showError(err.message || String(err)); for (const li of document.querySelectorAll("#steps li.running")) li.className = ""; }
  } finally {
    if (state.controller === controller) { state.controller = null; $("#ask-button").disabled = false; }
  }
}

/** Server-sent events over a fetch body (EventSource cannot POST). */
async function readEvents(stream, handler) {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let name = "message", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) name = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (data) handler(name, JSON.parse(data));
    }
  }
}

function onEvent(name, data) {
  if (name === "step1") {
    stepState("step1", "done", `${data.step1_nodes.length} sections · ${data.step1_locator}`);
    stepState("step2", "running");
    renderLocated(data);
  } else if (name === "step2") {
    stepState("step2", "done", `${data.step2_retrieved.length} chunks · ${data.step2_order}`);
    stepState("context", "running");
    renderRetrieved(data.step2_retrieved);
  } else if (name === "context") {
    const c = data.context;
    stepState("context", "done", `${c.passages.length} passages · ${c.used.toLocaleString()} chars`);
    stepState("answer", "running");
    renderEvidence(c.passages, null);
  } else if (name === "answer") {
    stepState("answer", "done", data.evidence_found ? "evidence found" : "not in the documents");
  } else if (name === "result") {
    renderResult(data);
    loadRuns();
  } else if (name === "error") {
    showError(data.error);
  }
}

// ------------------------------------------------------------------ rendering a run record

function renderResult(r) {
  state.result = r;
  const t = r.timing_ms || {};
  const ms = (k) => (t[k] != null ? `${Math.round(t[k])} ms` : "");
  if (r.notice) {
    for (const s of ["step1", "step2", "context", "answer"]) stepState(s, "done", "");
    $("#answer-card").hidden = false;
    $("#answer").replaceChildren(textEl("span", r.notice));
    $("#not-found").hidden = true;
    return;
  }
  stepState("step1", "done", `${r.step1_nodes.length} sections · ${r.step1_locator} · ${ms("locate")}`);
  stepState("step2", "done", `${r.step2_retrieved.length} chunks · ${ms("retrieve")}`);
  const c = r.context || { passages: [], used: 0 };
  stepState("context", "done", `${c.passages.length} passages · ${(c.used || 0).toLocaleString()} chars`);
  stepState("answer", "done", `${r.evidence_found ? "evidence found" : "not in the documents"} · ${ms("synthesize")}`);
  renderLocated(r);
  renderRetrieved(r.step2_retrieved);
  renderEvidence(c.passages, r.answer_quotes);
  renderAnswer(r);
}

function renderAnswer(r) {
  $("#answer-card").hidden = false;
  $("#not-found").hidden = !!r.evidence_found;
  const box = $("#answer");
  box.replaceChildren();
  box.setAttribute("lang", langOf(r.answer) || "en");
  // [N] is context passage N; [来源: heading path] / [Source: ...] names a passage's section
  const pattern = /\[(\d{1,3})\]|\[(?:来源|來源|Source|source)\s*[:：]\s*([^\]]+)\]/g;
  let last = 0, m;
  const text = r.answer || "";
  while ((m = pattern.exec(text))) {
    box.append(text.slice(last, m.index));
    const passages = (r.context && r.context.passages) || [];
    let n = null;
    if (m[1]) n = parseInt(m[1], 10);
    else {
      const want = m[2].trim();
      const i = passages.findIndex((p) => p.heading_path === want || want.endsWith(p.heading_path) || p.heading_path.endsWith(want));
      if (i >= 0) n = i + 1;
    }
    if (n !== null && passages[n - 1]) {
      const quote = quoteAfter(r.answer_quotes, n, text.slice(m.index + m[0].length, m.index + m[0].length + 400));
      box.append(el("button", { class: "cite", type: "button", "data-n": n, title: passages[n - 1].citation,
                                onclick: () => openContextPassage(n, quote) }, m[1] ? `[${n}]` : m[0]));
    } else box.append(m[0]);
    last = m.index + m[0].length;
  }
  box.append(text.slice(last));
  // what did not go as configured (an LLM that did not answer, a reranker that did not load), said as such
  const fb = $("#fallbacks");
  fb.replaceChildren(...(r.fallbacks || []).map((f) => textEl("li", `${f.step}: ${f.reason} → used ${f.used}`)));
  fb.hidden = !(r.fallbacks || []).length;
  const u = r.usage || {};
  const llm = (r.providers && r.providers.llm) || {};
  const tokens = (u.input_tokens || 0) + (u.output_tokens || 0);
  $("#answer-footer").textContent = `${Math.round((r.timing_ms || {}).total || 0)} ms · ${!llm.provider || llm.provider === "mock" ? "no LLM" : "llm " + llm.provider}` +
    (llm.model ? `:${llm.model}` : "") + (tokens ? ` · ${tokens} tokens` : "") + ` · run ${String(r.run_id).slice(0, 8)}` +
    (r.answer_truncated ? " · answer cut at the token limit" : "");
}

/** The extractive answer's quote that follows a [N] mark (its exact span), when there is one. */
function quoteAfter(quotes, n, following) {
  if (!quotes) return null;
  const after = following.replace(/^\s*["“「]?/, "");
  return quotes.find((q) => (q.ranks || []).includes(n) && q.text && after.startsWith(q.text.slice(0, 40))) || null;
}

function renderEvidence(passages, quotes) {
  const list = $("#evidence");
  list.replaceChildren();
  $("#evidence-card").hidden = !passages.length;
  passages.forEach((p, i) => {
    list.append(el("li", { "data-n": i + 1, onclick: () => openContextPassage(i + 1) },
      el("div", { class: "head" },
        el("button", { class: "cite", type: "button", text: `[${i + 1}]` }),
        textEl("span", p.heading_path, "path"),
        el("span", { class: "score", text: p.citation })),
      textEl("div", p.text, "text")));
  });
}

function renderRetrieved(hits) {
  $("#located-card").hidden = false;
  const list = $("#retrieved");
  list.replaceChildren();
  state.hits = new Map();
  for (const h of hits) {
    state.hits.set(h.node_id, (state.hits.get(h.node_id) || 0) + 1);
    const s = h.scores || {};
    const order = ["rerank_score", "section_score", "union_score", "fused_score"].find((k) => k in s);
    list.append(el("li", { onclick: () => openChunk(h.chunk_id) },
      el("div", { class: "head" },
        el("span", { class: "badge", text: `#${h.rank}` }),
        textEl("span", h.heading_path, "path"),
        el("span", { class: "score", text: `${h.citation}${order ? ` · ${order.replace("_score", "")} ${Number(s[order]).toFixed(3)}` : ""}` })),
      textEl("div", h.text, "text")));
  }
  if (state.result || hits.length) refreshTreeMarks();
}

function renderLocated(r) {
  $("#located-card").hidden = false;
  $("#thinking").textContent = r.step1_thinking || "";
  $("#thinking").setAttribute("lang", langOf(r.step1_thinking) || "en");
  state.located = new Map(r.step1_nodes.map((n, i) => [n.node_id, { rank: i + 1, score: n.score }]));
  loadTree(r.step1_nodes);
}

// ------------------------------------------------------------------ the section tree

let treeDocs = "";

async function loadTree(nodes) {
  const ids = nodes.map((n) => n.node_id).slice(0, 30);
  const key = ids.join("\n");
  if (key === treeDocs) { refreshTreeMarks(); return; }
  treeDocs = key;
  const query = ids.map((id) => "node=" + encodeURIComponent(id)).join("&");
  try {
    const data = await api("/api/tree" + (query ? "?" + query : ""));
    const root = el("ul");
    for (const n of data.nodes) root.append(treeNode(n, 0));
    $("#tree").replaceChildren(root);
    const docs = [...new Set(data.nodes.map((n) => n.doc_path))];
    $("#tree-hint").textContent = docs.length ? `— ${docs.slice(0, 3).join(", ")}${docs.length > 3 ? " …" : ""}` : "";
    refreshTreeMarks();
  } catch (err) { $("#tree").replaceChildren(el("p", { class: "placeholder", text: err.message })); }
}

function treeNode(n, depth) {
  const label = el("div", { class: "node" + (n.kind === "document" ? " doc" : ""), "data-node": n.node_id,
                            title: n.summary || n.heading_path, onclick: (e) => { e.stopPropagation(); openSection(n.node_id); } },
    textEl("span", n.heading || n.doc_path, "h"));
  const li = el("li", {}, label);
  if (n.children && n.children.length) {
    const ul = el("ul");
    for (const c of n.children) ul.append(treeNode(c, depth + 1));
    li.append(ul);
  }
  return li;
}

function refreshTreeMarks() {
  for (const node of document.querySelectorAll("#tree .node")) {
    const id = node.dataset.node;
    node.classList.toggle("located", state.located.has(id));
    node.classList.toggle("current", id === state.currentNode);
    for (const b of node.querySelectorAll(".badge")) b.remove();
    const hits = state.hits.get(id);
    if (hits) node.append(el("span", { class: "badge hits", title: "chunks retrieved in step 2", text: `${hits} hit${hits > 1 ? "s" : ""}` }));
    const loc = state.located.get(id);
    if (loc) node.append(el("span", { class: "badge", title: `located #${loc.rank} in step 1`,
                                      text: `#${loc.rank} ${loc.score != null ? Number(loc.score).toFixed(2) : ""}`.trim() }));
  }
  const first = document.querySelector("#tree .node.located");
  if (first) first.scrollIntoView({ block: "nearest" });
}

// ------------------------------------------------------------------ the passage viewer

/** A section's text in the viewer, with marked spans: [{start, end, cls}] (the passage, the quote). */
function showInViewer(title, cite, text, spans, nodeId) {
  $("#viewer-title").textContent = title;
  $("#viewer-title").setAttribute("lang", langOf(title) || "en");
  $("#viewer-cite").textContent = cite;
  const box = $("#viewer");
  box.setAttribute("lang", langOf(text) || "en");
  box.replaceChildren();
  const ok = (spans || []).filter((s) => s && s.start >= 0 && s.end <= text.length && s.start < s.end);
  // cut points of every span, so nested spans (a quote inside its passage) render as nested marks
  const cuts = [...new Set([0, text.length, ...ok.flatMap((s) => [s.start, s.end])])].sort((a, b) => a - b);
  let focus = null;
  for (let i = 0; i + 1 < cuts.length; i++) {
    const [a, b] = [cuts[i], cuts[i + 1]];
    const inside = ok.filter((s) => s.start <= a && b <= s.end);
    if (!inside.length) { box.append(text.slice(a, b)); continue; }
    const strongest = inside[inside.length - 1];
    const mark = el("mark", { class: strongest.cls }, text.slice(a, b));
    box.append(mark);
    if (!focus || (strongest.cls === "quote" && focus.className !== "quote")) focus = mark;
  }
  if (focus) focus.scrollIntoView({ block: "center" });
  state.currentNode = nodeId;
  refreshTreeMarks();
}

async function openContextPassage(n, quote) {
  const r = state.result;
  const p = r && r.context && r.context.passages[n - 1];
  if (!p) return;
  for (const b of document.querySelectorAll(".cite.active, .evidence li.active")) b.classList.remove("active");
  for (const b of document.querySelectorAll(`.cite[data-n="${n}"], .evidence li[data-n="${n}"]`)) b.classList.add("active");
  try {
    const s = await api(`/api/sections/${encodeURIComponent(p.node_id)}`);
    const base = s.text_start_char != null ? s.text_start_char : p.start_char - s.text.indexOf(p.text);
    const spans = [{ start: p.start_char - base, end: p.end_char - base, cls: quote ? "passage" : "quote" }];
    if (quote && quote.start_char != null) spans.push({ start: quote.start_char - base, end: quote.end_char - base, cls: "quote" });
    showInViewer(`[${n}] ${p.heading_path}`, quote && quote.citation ? quote.citation : p.citation, s.text, spans, p.node_id);
  } catch (err) { showError(err.message); }
}

async function openChunk(chunkId) {
  try {
    const p = await api(`/api/passages/${encodeURIComponent(chunkId)}`);
    showInViewer(p.heading_path, p.citation, p.section.text, [{ start: p.highlight[0], end: p.highlight[1], cls: "quote" }], p.node_id);
  } catch (err) { showError(err.message); }
}

async function openSection(nodeId) {
  try {
    const s = await api(`/api/sections/${encodeURIComponent(nodeId)}`);
    showInViewer(s.heading_path || s.heading, s.citation + (s.truncated ? " (cut)" : ""), s.text, [], nodeId);
  } catch (err) { showError(err.message); }
}

// ------------------------------------------------------------------ wiring

$("#ask-form").addEventListener("submit", ask);
$("#question").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); $("#ask-form").requestSubmit(); }
});
$("#refresh-runs").addEventListener("click", loadRuns);
$("#token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  state.token = $("#token").value.trim();
  localStorage.setItem("treerag-token", state.token);
  $("#token-form").hidden = true;
  loadIndexInfo();
  loadRuns();
});
loadIndexInfo();
loadRuns();
