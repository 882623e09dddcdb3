// muster dashboard: draws /api/snapshot, redraws on each version that
// /api/events announces, keeps the view (filters, sort, open workload) in
// the URL's fragment so that a link shows the same view.
"use strict";

const $ = (id) => document.getElementById(id);
let snap = null;
let loading = false, wanted = 0, drawn = false;
let detailAt = 0, detailVersion = 0;

// ---- the view in the URL ----
function view() {
  const p = new URLSearchParams(location.hash.slice(1));
  return { ns: p.get("ns") || "", kind: p.get("kind") || "", state: p.get("state") || "",
    sort: p.get("sort") || "state", dir: p.get("dir") || "asc", w: p.get("w") || "" };
}
function setView(change) {
  const v = Object.assign(view(), change);
  const p = new URLSearchParams();
  for (const [k, val] of Object.entries(v)) if (val) p.set(k, val);
  history.replaceState(null, "", "#" + p.toString());
  render();
}

// ---- one colour per workload, the same everywhere ----
function wkey(w) { return w.apiVersion + "|" + w.kind + "|" + w.namespace + "|" + w.name; }
function colour(w) {
  const s = wkey(w);
  let h = 2166136261;
  for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); }
  const hue = ((h >>> 0) % 360 + 360) % 360;
  return `hsl(${hue}, 62%, ${52 + ((h >>> 9) % 3) * 6}%)`;
}

// ---- live ----
function connect() {
  const es = new EventSource("/api/events");
  es.addEventListener("version", (e) => { wanted = Number(e.data); $("live").className = "live on"; load(); });
  es.onerror = () => { $("live").className = "live off"; $("live").textContent = "disconnected, retrying"; };
}
async function load() {
  if (loading || (snap && snap.version >= wanted)) return;
  loading = true;
  try {
    const r = await fetch("/api/snapshot", { cache: "no-store" });
    if (!r.ok) throw new Error(r.status + " " + (await r.text()));
    snap = await r.json();
    if (!drawn) performance.mark("muster-snapshot");
    render();
    if (!drawn) {
      // First render: marks for the benchmark (BENCHMARKS.md, row
      // dashboard): the snapshot parsed, the DOM built, and the frame
      // after the first paint.
      drawn = true;
      performance.mark("muster-drawn");
      requestAnimationFrame(() => requestAnimationFrame(() => performance.mark("muster-painted")));
    }
  } catch (err) {
    $("live").className = "live off";
    $("live").textContent = "error: " + err.message;
  } finally {
    loading = false;
    if (snap && snap.version < wanted) setTimeout(load, 0);
  }
}

// ---- drawing ----
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}
function render() {
  if (!snap) return;
  const v = view();
  $("live").textContent = "live · " + new Date(snap.time).toLocaleTimeString();
  renderTotals();
  renderMap(v);
  renderGangs(v);
  renderDetail(v);
  document.body.dataset.version = snap.version; // for tests: the version drawn
}
function renderTotals() {
  const t = snap.totals, box = $("totals");
  box.replaceChildren();
  const add = (id, n, label) => {
    const d = el("div", "total"); d.id = id;
    d.append(el("b", "", String(n)), el("span", "", label));
    box.append(d);
  };
  add("t-alloc", t.allocated + " / " + t.capacity, "GPUs allocated");
  add("t-free", t.free, "free");
  add("t-idle", t.idlePartial, "idle on partly used nodes");
  add("t-wait", t.waiting, "requested by waiting pods");
}
function renderMap(v) {
  const map = $("map"), frag = document.createDocumentFragment();
  const groups = new Map();
  for (const n of snap.nodes) {
    const path = n.d.filter((x) => x).join(" › ") || "nodes";
    if (!groups.has(path)) groups.set(path, []);
    groups.get(path).push(n);
  }
  for (const [path, nodes] of groups) {
    const g = el("div", "domain");
    g.dataset.domain = path;
    const free = nodes.reduce((a, n) => a + n.c.filter((c) => c < 0).length, 0);
    const cap = nodes.reduce((a, n) => a + n.c.length, 0);
    g.append(el("div", "dname", `${path} — ${cap - free}/${cap} GPUs held`));
    const box = el("div", "nodes");
    for (const n of nodes) box.append(nodeStrip(n, v));
    g.append(box);
    frag.append(g);
  }
  map.replaceChildren(frag);
}
function nodeStrip(n, v) {
  const d = el("div", "node" + (n.u || n.t ? " off" : ""));
  d.dataset.node = n.n;
  const label = el("div", "nname", n.n);
  label.title = n.n + (n.u ? " (cordoned)" : "") + (n.t ? " (tainted)" : "");
  const strip = el("div", "strip");
  for (const ci of n.c) strip.append(cell(ci, v));
  d.append(label, strip);
  return d;
}
function cell(ci, v) {
  if (ci < 0) { const c = el("i", "cell free"); c.title = "free"; return c; }
  const p = snap.pods[ci];
  const w = p.w >= 0 ? snap.workloads[p.w] : null;
  const c = el("i", "cell " + (p.nom ? "nominated" : w ? "held" : "nogang"));
  c.dataset.pod = p.ns + "/" + p.n;
  let title = (p.nom ? "reserved for " : "") + "pod " + p.ns + "/" + p.n;
  if (w) {
    c.dataset.wl = w.kind + "/" + w.namespace + "/" + w.name;
    if (p.nom) c.style.borderColor = colour(w); else c.style.background = colour(w);
    title += "\n" + w.kind + " " + w.namespace + "/" + w.name;
    if (p.r) title += "\nrole " + p.r;
    if (p.g) title += "\ngang " + p.g;
    c.dataset.key = wkey(w);
    if (wkey(w) === v.w) c.classList.add("sel");
  } else {
    title += "\n(no gang)";
  }
  if (p.o) title += "\nowner " + p.o;
  c.title = title;
  return c;
}
function fillSelect(id, values, cur) {
  const s = $(id), keep = s.options[0];
  s.replaceChildren(keep);
  for (const x of [...new Set(values)].sort()) { const o = el("option", "", x); o.value = x; s.append(o); }
  if (cur && !values.includes(cur)) { const o = el("option", "", cur); o.value = cur; s.append(o); }
  s.value = cur;
}
// stateCell is the state, and the admission queue's (Kueue's) under it
// when one holds the workload: which of the two gates it is behind.
function stateCell(w) {
  const td = el("td", "state-" + w.state, w.state);
  if (w.queue) {
    const q = el("small", "queue", w.queue);
    q.title = w.queueSummary || "";
    td.append(el("br"), q);
  }
  return td;
}
function renderGangs(v) {
  fillSelect("f-ns", snap.workloads.map((w) => w.namespace), v.ns);
  fillSelect("f-kind", snap.workloads.map((w) => w.kind), v.kind);
  $("f-state").value = v.state;
  const rows = snap.workloads.filter((w) => (!v.ns || w.namespace === v.ns) && (!v.kind || w.kind === v.kind) && (!v.state || w.state === v.state));
  const order = { "partly-bound": 0, evicted: 1, waiting: 2, queued: 3, running: 4, done: 5 };
  const key = (w) => v.sort === "state" ? order[w.state] : v.sort === "created" ? -Date.parse(w.created) : w[v.sort];
  rows.sort((a, b) => {
    const x = key(a), y = key(b);
    const c = x < y ? -1 : x > y ? 1 : wkey(a) < wkey(b) ? -1 : 1;
    return v.dir === "desc" ? -c : c;
  });
  for (const th of document.querySelectorAll("#gangs th[data-sort]")) {
    th.classList.toggle("asc", th.dataset.sort === v.sort && v.dir === "asc");
    th.classList.toggle("desc", th.dataset.sort === v.sort && v.dir === "desc");
  }
  const body = document.querySelector("#gangs tbody"), frag = document.createDocumentFragment();
  for (const w of rows) {
    const tr = el("tr");
    tr.dataset.wl = w.kind + "/" + w.namespace + "/" + w.name;
    tr.dataset.state = w.state;
    const kind = el("td");
    const sw = el("span", "swatch"); sw.style.background = colour(w);
    kind.append(sw, w.kind);
    tr.append(kind, el("td", "", w.namespace), el("td", "", w.name), el("td", "", String(w.minMember)),
      el("td", "", `${w.scheduled} of ${w.pods}`), el("td", "", `${w.ready} of ${w.pods}`), el("td", "", String(w.gpus)),
      el("td", "", w.age), stateCell(w), el("td", "reason", w.reason || ""), el("td", "fit"));
    tr.dataset.key = wkey(w);
    fillVerdict(tr, w);
    frag.append(tr);
  }
  body.replaceChildren(frag);
  $("no-gangs").hidden = snap.workloads.length > 0;
  lastRows = rows;
  loadVerdicts(rows);
}

// ---- what would let a waiting gang start: muster fit's answer ----
// Asked of /api/fit one workload at a time (each fit lists the cluster; the
// server keeps answers 20 s), for at most 25 rows per pass, the waiting
// ones in the table's order. A verdict is asked again once it is 20 s old
// and the cluster has changed (a new snapshot drew the table).
let lastRows = [];
const verdicts = new Map(); // wkey → {verdict, summary, at}
const verdictTTL = 20000;
let verdictsBusy = false;
function waitingState(w) { return w.state === "waiting" || w.state === "partly-bound" || w.state === "queued"; }
function fillVerdict(tr, w) {
  const td = tr.querySelector(".fit"), v = verdicts.get(wkey(w));
  if (!waitingState(w)) { td.textContent = ""; delete td.dataset.verdict; return; }
  td.textContent = v ? v.summary : "asking muster fit…";
  if (v) td.dataset.verdict = v.verdict; else delete td.dataset.verdict;
}
async function loadVerdicts(rows) {
  if (verdictsBusy) return;
  verdictsBusy = true;
  let more = false;
  try {
    const now = Date.now();
    const stale = rows.filter((w) => waitingState(w) && !(verdicts.has(wkey(w)) && now - verdicts.get(wkey(w)).at < verdictTTL));
    const todo = stale.slice(0, 25);
    more = stale.length > todo.length && stale.slice(todo.length).some((w) => !verdicts.has(wkey(w)));
    for (const w of todo) {
      const q = new URLSearchParams({ apiVersion: w.apiVersion, kind: w.kind, namespace: w.namespace, name: w.name });
      let v;
      try {
        const r = await fetch("/api/fit?" + q.toString(), { cache: "no-store" });
        const d = await r.json();
        v = r.ok ? d : { verdict: "error", summary: "muster fit: " + d.error };
      } catch (err) {
        v = { verdict: "error", summary: "muster fit: " + err.message };
      }
      v.at = Date.now();
      verdicts.set(wkey(w), v);
      for (const tr of document.querySelectorAll("#gangs tbody tr")) {
        if (tr.dataset.key !== wkey(w)) continue;
        const cur = snap.workloads.find((x) => wkey(x) === wkey(w));
        if (cur) fillVerdict(tr, cur);
      }
    }
  } finally {
    verdictsBusy = false;
    // Rows never asked yet get the next pass without waiting for a change.
    if (more) setTimeout(() => loadVerdicts(lastRows), 0);
  }
}
async function renderDetail(v) {
  const box = $("detail");
  if (!v.w) { box.hidden = true; return; }
  const [apiVersion, kind, namespace, name] = v.w.split("|");
  box.hidden = false;
  $("detail-title").textContent = `${kind} ${namespace}/${name}`;
  // describe and fit make API calls: refresh at most every 3 s.
  const now = Date.now();
  if (box.dataset.w === v.w && (detailVersion === snap.version || now - detailAt < 3000)) return;
  if (box.dataset.w !== v.w) { $("detail-describe").textContent = "loading…"; $("detail-fit").textContent = ""; }
  box.dataset.w = v.w; detailAt = now; detailVersion = snap.version;
  const q = new URLSearchParams({ apiVersion, kind, namespace, name });
  try {
    const r = await fetch("/api/workload?" + q.toString(), { cache: "no-store" });
    const d = await r.json();
    if (view().w !== v.w) return;
    if (!r.ok) { $("detail-describe").textContent = "error: " + d.error; return; }
    $("detail-describe").textContent = d.describe;
    $("detail-fit").textContent = d.fit || ("fit: " + (d.fitError || "no answer"));
  } catch (err) {
    $("detail-describe").textContent = "error: " + err.message;
  }
}

// ---- wiring ----
document.addEventListener("DOMContentLoaded", () => {
  $("f-ns").addEventListener("change", (e) => setView({ ns: e.target.value }));
  $("f-kind").addEventListener("change", (e) => setView({ kind: e.target.value }));
  $("f-state").addEventListener("change", (e) => setView({ state: e.target.value }));
  $("detail-close").addEventListener("click", () => setView({ w: "" }));
  for (const th of document.querySelectorAll("#gangs th[data-sort]")) {
    th.addEventListener("click", () => {
      const v = view();
      setView({ sort: th.dataset.sort, dir: v.sort === th.dataset.sort && v.dir === "asc" ? "desc" : "asc" });
    });
  }
  // One listener each for the map's cells and the table's rows (8000
  // cells at 1000 nodes: listeners per element slowed the first render).
  const open = (e) => {
    const t = e.target.closest("[data-key]");
    if (t && (t.tagName === "TR" || t.classList.contains("held") || t.classList.contains("nominated"))) setView({ w: t.dataset.key });
  };
  $("map").addEventListener("click", open);
  document.querySelector("#gangs tbody").addEventListener("click", open);
  window.addEventListener("hashchange", render);
  connect();
});
