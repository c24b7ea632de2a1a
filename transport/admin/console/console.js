// The operator console of admit's admin API. Every call is an admin API request with the token of
// sessionStorage as its Authorization field; nothing else is stored, nothing is fetched from
// elsewhere. Text from the server is always set as text, never as markup.
"use strict";

const tokenKey = "admit-admin-token";
const statsEveryMS = 2000;
const topEveryMS = 5000;
const rateWindowMS = 60 * 1000;
const chartMS = 5 * 60 * 1000;
const results = ["allowed", "limited", "shadow", "replayed", "unavailable", "invalid", "degraded"];

const $ = (id) => document.getElementById(id);
let generation = 0; // bumped whenever polling must stop: a new token, a 401
let history = []; // {t, decisions: Map policy -> {result: count}, samples}
let policyNames = [];

class APIError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function token() {
  return sessionStorage.getItem(tokenKey) || "";
}

// holding shows whether the page holds a token: the entry field, or a line saying so.
function holding(held) {
  $("token-entry").hidden = held;
  $("token-held").hidden = !held;
}

function say(text, kind) {
  const m = $("message");
  m.textContent = text;
  m.className = kind || "";
}

// api sends one admin API request and returns its JSON body; any other answer than 2xx throws an
// APIError with the API's own message. A 401 or 429 also stops the page.
async function api(method, path, body) {
  const t = token();
  if (!t) {
    throw new APIError(401, "no token");
  }
  const init = { method: method, headers: { Authorization: "Bearer " + t }, cache: "no-store" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    throw new APIError(0, "the admin API did not answer (" + e.message + ")");
  }
  let data = null;
  try {
    data = await res.json();
  } catch (e) {
    data = null;
  }
  if (!res.ok) {
    const msg = data && typeof data.error === "string" ? data.error : res.status + " " + res.statusText;
    if (res.status === 401 || res.status === 429) {
      refused(res.status, msg, res.headers.get("Retry-After"));
    }
    throw new APIError(res.status, msg);
  }
  return data;
}

// refused stops the page after the API refused the token.
function refused(status, msg, retryAfter) {
  generation++;
  $("data").hidden = true;
  if (status === 401) {
    sessionStorage.removeItem(tokenKey);
    holding(false);
    say("401 unauthorized: the admin API refused the token. Enter the admin token of this instance.", "error");
    $("token").focus();
  } else {
    // The budget of failures of this address is spent: every call is refused, the right token's
    // too, until its window ends. Try again then, with the token held.
    const wait = Math.max(1, Number(retryAfter) || 60);
    say("429: " + msg + "; trying again in " + wait + " s.", "error");
    const gen = generation;
    setTimeout(() => {
      if (gen === generation && token()) {
        start();
      }
    }, wait * 1000);
  }
}

function cell(tr, text, cls) {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) {
    td.className = cls;
  }
  tr.appendChild(td);
  return td;
}

// headRow gives table a header row of the column names.
function headRow(table, names) {
  const head = table.createTHead().insertRow();
  for (const name of names) {
    const th = document.createElement("th");
    th.scope = "col";
    th.textContent = name;
    head.appendChild(th);
  }
}

function clear(el) {
  while (el.firstChild) {
    el.removeChild(el.firstChild);
  }
}

// duration writes ms in its largest unit when that is whole (1h, 10m), else in its largest two
// units (59m 55s).
function duration(ms) {
  const units = [["d", 86400000], ["h", 3600000], ["m", 60000], ["s", 1000]];
  if (ms < 1000) {
    return Math.round(ms) + "ms";
  }
  const i = units.findIndex(([, n]) => ms >= n);
  const [u, n] = units[i];
  if (ms % n === 0) {
    return ms / n + u;
  }
  const left = Math.round(ms / 1000) * 1000;
  const first = Math.floor(left / n);
  const next = units[i + 1];
  if (!next) {
    return first + u;
  }
  const second = Math.floor((left % n) / next[1]);
  return first + u + (second ? " " + second + next[0] : "");
}

function rate(x) {
  if (x === null || Number.isNaN(x)) {
    return "-";
  }
  return x >= 100 ? x.toFixed(0) : x >= 1 ? x.toFixed(1) : x.toFixed(2);
}

function percent(x) {
  return x === null || Number.isNaN(x) ? "-" : (100 * x).toFixed(1) + " %";
}

// showPolicies fills the policies' table and the policy choice from GET /v1/policies.
function showPolicies(p) {
  $("config-hash").textContent = "Configuration SHA-256 " + p.config_hash + ".";
  const body = $("policies-table").tBodies[0];
  clear(body);
  const select = $("policy");
  const chosen = select.value;
  while (select.options.length > 1) {
    select.remove(1);
  }
  policyNames = [];
  for (const pol of p.policies) {
    policyNames.push(pol.name);
    const tr = document.createElement("tr");
    const th = document.createElement("th");
    th.scope = "row";
    th.textContent = pol.name;
    tr.appendChild(th);
    cell(tr, pol.algorithm + (pol.aligned ? " (aligned)" : ""));
    cell(tr, String(pol.limit), "num");
    cell(tr, duration(pol.window_ms));
    cell(tr, pol.burst ? String(pol.burst) : "-", "num");
    const tiers = (pol.tiers || []).map((t) => t.name + ": " + t.limit + " per " + duration(t.window_ms) + (t.burst ? ", burst " + t.burst : ""));
    cell(tr, tiers.length ? tiers.join("; ") : "-");
    cell(tr, pol.failure === "open" ? "open (local limit " + pol.local_limit + " per instance)" : "closed", pol.failure === "open" ? "warn" : "");
    cell(tr, pol.mode, pol.mode === "shadow" ? "warn" : "");
    body.appendChild(tr);
    const opt = document.createElement("option");
    opt.value = pol.name;
    opt.textContent = pol.name;
    select.appendChild(opt);
  }
  if (policyNames.includes(chosen)) {
    select.value = chosen;
  }
  const top = p.top;
  $("top-note").textContent = top.size > 0
    ? "Each policy's " + top.size + " subjects rejected most by this instance over the last " + duration(top.period_ms) +
      " or so (a space-saving sketch: a count is over by at most its error). Other instances keep their own lists: admit top merges them." +
      (top.revealed ? "" : " Subjects are shown by digest: set server.top.reveal_subjects to see and act on them here.")
    : "The top list is off (server.top.size: 0).";
}

// record keeps one GET /v1/stats answer, and drops those older than the charts need.
function record(stats) {
  const decisions = new Map();
  for (const s of stats.samples) {
    if (s.name === "admit_decisions_total" && s.labels) {
      const p = s.labels.policy;
      if (!decisions.has(p)) {
        decisions.set(p, {});
      }
      decisions.get(p)[s.labels.result] = s.value;
    }
  }
  history.push({ t: stats.time_ms, decisions: decisions, samples: stats.samples });
  const oldest = stats.time_ms - chartMS - statsEveryMS;
  history = history.filter((h) => h.t >= oldest);
}

// delta returns the per-second rate of policy's result (every result for "all") from a to b.
function delta(a, b, policy, result) {
  const dt = (b.t - a.t) / 1000;
  if (dt <= 0) {
    return null;
  }
  const av = a.decisions.get(policy) || {};
  const bv = b.decisions.get(policy) || {};
  const names = result === "all" ? results : [result];
  let sum = 0;
  for (const r of names) {
    sum += Math.max(0, (bv[r] || 0) - (av[r] || 0)); // a restart starts the counters again
  }
  return sum / dt;
}

function sampleSum(h, name, filter) {
  let sum = 0;
  let found = false;
  for (const s of h.samples) {
    if (s.name === name && (!filter || filter(s.labels || {}))) {
      sum += s.value;
      found = true;
    }
  }
  return found ? sum : null;
}

// showStats fills the rates, the backend's state and the charts from the history.
function showStats() {
  const last = history[history.length - 1];
  const first = history.find((h) => h.t >= last.t - rateWindowMS) || last;
  const base = first === last && history.length > 1 ? history[history.length - 2] : first;
  const body = $("rates-table").tBodies[0];
  clear(body);
  for (const p of policyNames) {
    const tr = document.createElement("tr");
    const th = document.createElement("th");
    th.scope = "row";
    th.textContent = p;
    tr.appendChild(th);
    const all = base === last ? null : delta(base, last, p, "all");
    const limited = base === last ? null : delta(base, last, p, "limited");
    cell(tr, rate(all), "num");
    cell(tr, base === last ? "-" : rate(delta(base, last, p, "allowed")), "num");
    cell(tr, rate(limited), "num" + (limited > 0 ? " bad" : ""));
    cell(tr, all ? percent(limited / all) : "-", "num");
    cell(tr, base === last ? "-" : rate(delta(base, last, p, "shadow")), "num");
    const unavailable = base === last ? null : delta(base, last, p, "unavailable");
    const degraded = base === last ? null : delta(base, last, p, "degraded");
    cell(tr, rate(unavailable), "num" + (unavailable > 0 ? " bad" : ""));
    cell(tr, rate(degraded), "num" + (degraded > 0 ? " warn" : ""));
    body.appendChild(tr);
  }
  showBackend(base, last);
  showCharts();
}

function showBackend(base, last) {
  const el = $("backend");
  clear(el);
  const add = (text, cls) => {
    const s = document.createElement("span");
    s.textContent = text;
    if (cls) {
      s.className = cls;
    }
    el.appendChild(s);
  };
  const states = last.samples.filter((s) => s.name === "admit_breaker_state" && s.value === 1);
  if (states.length === 0) {
    add("Backend: this instance has no Redis breaker (the memory backend, or a Store without one). ");
  } else {
    for (const s of states) {
      add("Redis breaker " + s.labels.breaker + ": ");
      add(s.labels.state.replace("_", "-"), "state-" + s.labels.state);
      add(". ");
    }
  }
  const dt = (last.t - base.t) / 1000;
  if (dt > 0) {
    const errs = (sampleSum(last, "admit_backend_errors_total") || 0) - (sampleSum(base, "admit_backend_errors_total") || 0);
    add("Backend errors: " + rate(Math.max(0, errs) / dt) + "/s", errs > 0 ? "bad" : "");
    const refusedNow = sampleSum(last, "admit_breaker_refused_total");
    if (refusedNow !== null) {
      add("; refused by the open breaker: " + rate(Math.max(0, refusedNow - (sampleSum(base, "admit_breaker_refused_total") || 0)) / dt) + "/s");
    }
    add(". ");
  }
  const cache = sampleSum(last, "admit_overlimit_cache_entries");
  if (cache !== null) {
    add("Over-limit cache: " + cache + " entries.");
  }
}

// showCharts draws, per policy, decisions/s and limited/s between consecutive polls.
function showCharts() {
  const charts = $("charts");
  clear(charts);
  if (history.length < 2) {
    return;
  }
  const ns = "http://www.w3.org/2000/svg";
  const end = history[history.length - 1].t;
  const span = Math.min(chartMS, end - history[0].t); // 5 minutes, or since the page opened
  const since = span < chartMS ? "since " + new Date(history[0].t).toLocaleTimeString() : "last 5 minutes";
  for (const p of policyNames) {
    const all = [];
    const limited = [];
    for (let i = 1; i < history.length; i++) {
      const x = 1000 - ((end - history[i].t) / span) * 1000;
      all.push([x, delta(history[i - 1], history[i], p, "all") || 0]);
      limited.push([x, delta(history[i - 1], history[i], p, "limited") || 0]);
    }
    const top = Math.max(1, ...all.map((v) => v[1]));
    const fig = document.createElement("figure");
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("class", "chart");
    svg.setAttribute("viewBox", "0 0 1000 100");
    svg.setAttribute("preserveAspectRatio", "none");
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", p + ": decisions per second and limited per second, " + since + ", up to " + rate(top) + "/s");
    for (const [cls, pts] of [["all", all], ["limited", limited]]) {
      const line = document.createElementNS(ns, "polyline");
      line.setAttribute("class", cls);
      line.setAttribute("points", pts.map((v) => v[0].toFixed(1) + "," + (98 - (v[1] / top) * 94).toFixed(1)).join(" "));
      svg.appendChild(line);
    }
    fig.appendChild(svg);
    const cap = document.createElement("figcaption");
    const name = document.createElement("strong");
    name.textContent = p;
    cap.appendChild(name);
    const a = document.createElement("span");
    a.className = "swatch-all";
    a.textContent = " decisions/s";
    const l = document.createElement("span");
    l.className = "swatch-limited";
    l.textContent = " limited/s";
    cap.appendChild(a);
    cap.appendChild(document.createTextNode(" and"));
    cap.appendChild(l);
    cap.appendChild(document.createTextNode(", " + since + "; top of the chart " + rate(top) + "/s"));
    fig.appendChild(cap);
    charts.appendChild(fig);
  }
}

// showTop fills the top lists from GET /v1/top.
function showTop(top) {
  const lists = $("top-lists");
  clear(lists);
  for (const p of top.policies) {
    const h = document.createElement("h3");
    h.textContent = p.policy + (p.error_bound ? " (counts over by at most " + p.error_bound + ")" : "");
    lists.appendChild(h);
    if (p.subjects.length === 0) {
      const none = document.createElement("p");
      none.className = "note";
      none.textContent = "No subject limited here lately.";
      lists.appendChild(none);
      continue;
    }
    const wrap = document.createElement("div");
    wrap.className = "scroll";
    const table = document.createElement("table");
    table.className = "top-table";
    table.dataset.policy = p.policy;
    headRow(table, ["Subject", "Digest", "Rejected", "Error", "Last seen", ""]);
    const body = table.createTBody();
    for (const s of p.subjects) {
      const tr = body.insertRow();
      cell(tr, s.key !== undefined ? s.key : "(hidden)", "subject-key");
      cell(tr, s.digest, "digest");
      cell(tr, String(s.rejected), "num");
      cell(tr, String(s.error), "num");
      cell(tr, new Date(s.last_seen).toLocaleTimeString());
      const td = cell(tr, "");
      if (s.key !== undefined) {
        const b = document.createElement("button");
        b.type = "button";
        b.className = "secondary";
        b.textContent = "Select";
        b.setAttribute("aria-label", "Select subject " + s.key + " of policy " + p.policy);
        b.addEventListener("click", () => {
          $("key").value = s.key;
          $("policy").value = p.policy;
          $("key").focus();
          inspect();
        });
        td.appendChild(b);
      }
    }
    wrap.appendChild(table);
    lists.appendChild(wrap);
  }
}

async function pollStats(gen) {
  while (gen === generation) {
    try {
      record(await api("GET", "/v1/stats"));
      showStats();
    } catch (e) {
      if (gen === generation && e.status !== 401 && e.status !== 429) {
        $("backend").textContent = "Counters: " + e.message + ".";
      }
    }
    await new Promise((r) => setTimeout(r, statsEveryMS));
  }
}

async function pollTop(gen) {
  while (gen === generation) {
    try {
      showTop(await api("GET", "/v1/top"));
    } catch (e) {
      if (gen === generation && e.status !== 401 && e.status !== 429) {
        clear($("top-lists"));
        if (e.status !== 404) {
          $("top-lists").textContent = "Top list: " + e.message + ".";
        }
      }
    }
    await new Promise((r) => setTimeout(r, topEveryMS));
  }
}

// start reads the policies with the token and, if the API takes it, shows the data and polls.
async function start() {
  const gen = ++generation;
  history = [];
  holding(token() !== "");
  if (!token()) {
    $("data").hidden = true;
    say("Enter the admin token to see this instance.");
    return;
  }
  say("Reading the policies…");
  let p;
  try {
    p = await api("GET", "/v1/policies");
  } catch (e) {
    if (e.status !== 401 && e.status !== 429) {
      say("GET /v1/policies: " + e.message, "error");
    }
    return;
  }
  if (gen !== generation) {
    return;
  }
  showPolicies(p);
  $("data").hidden = false;
  say("Connected to " + location.host + ".", "ok");
  pollStats(gen);
  pollTop(gen);
}

// confirmed asks the operator to confirm text in the dialog; it resolves true on Confirm only.
function confirmed(text) {
  const dialog = $("confirm");
  $("confirm-text").textContent = text;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "yes"), { once: true });
    dialog.returnValue = "";
    dialog.showModal();
    $("confirm-no").focus();
  });
}

function subject() {
  const key = $("key").value;
  if (key === "") {
    showResult("Enter a subject first.", "error");
    $("key").focus();
    return null;
  }
  return { key: key, policy: $("policy").value, tier: $("tier").value.trim(), reason: $("reason").value };
}

function showResult(text, kind) {
  const out = $("subject-result");
  clear(out);
  const p = document.createElement("p");
  p.textContent = text;
  p.className = kind === "error" ? "bad" : "";
  p.id = "subject-message";
  out.appendChild(p);
  return out;
}

function whom(s) {
  return "subject \u201c" + s.key + "\u201d under " + (s.policy ? "policy " + s.policy : "every policy");
}

async function inspect() {
  const s = subject();
  if (!s) {
    return;
  }
  const q = new URLSearchParams({ key: s.key });
  if (s.policy) {
    q.set("policy", s.policy);
  }
  if (s.tier) {
    q.set("tier", s.tier);
  }
  try {
    const st = await api("GET", "/v1/state?" + q.toString());
    const out = showResult("State of " + whom(s) + " (a peek: nothing consumed):");
    const table = document.createElement("table");
    table.id = "state-table";
    headRow(table, ["Policy", "Numbers from", "Remaining", "Limit", "Window", "Limited", "Full again in", "Note"]);
    const body = table.createTBody();
    for (const d of st.decisions) {
      const tr = body.insertRow();
      cell(tr, d.policy);
      cell(tr, d.source + (d.tier ? " " + d.tier : "") + (d.reason ? " (" + d.reason + ")" : ""));
      cell(tr, String(d.remaining), "num state-remaining");
      cell(tr, String(d.limit), "num");
      cell(tr, duration(d.window_ms));
      cell(tr, d.limited ? "yes" : "no", d.limited ? "bad" : "");
      cell(tr, duration(d.reset_after_ms));
      const notes = [];
      if (d.shadow) {
        notes.push("shadow");
      }
      if (d.degraded) {
        notes.push("degraded: this instance's local limiter");
      }
      if (d.expires_in_ms) {
        notes.push("override expires in " + duration(d.expires_in_ms));
      }
      if (d.unused) {
        notes.push("unused: no policy of this name is loaded");
      }
      if (d.corrupt) {
        notes.push("corrupt: " + d.error);
      }
      cell(tr, notes.join("; "), d.corrupt ? "bad" : "");
    }
    const wrap = document.createElement("div");
    wrap.className = "scroll";
    wrap.appendChild(table);
    out.appendChild(wrap);
  } catch (e) {
    if (e.status !== 401 && e.status !== 429) {
      showResult("Inspect: " + e.message, "error");
    }
  }
}

async function change(what, ask, method, path, body, done) {
  if (!(await confirmed(ask))) {
    showResult(what + ": cancelled, nothing changed.");
    return;
  }
  try {
    const res = await api(method, path, body);
    showResult(done(res), "ok");
  } catch (e) {
    if (e.status !== 401 && e.status !== 429) {
      showResult(what + ": " + e.message, "error");
    }
  }
}

function reset() {
  const s = subject();
  if (!s) {
    return;
  }
  const body = { key: s.key };
  if (s.policy) {
    body.policy = s.policy;
  }
  if (s.reason) {
    body.reason = s.reason;
  }
  change("Reset", "Reset " + whom(s) + "? Its counters are deleted on the backend: its next request, through any instance, finds its whole allowance.",
    "POST", "/v1/reset", body, (r) => "Reset " + whom(s) + ": " + r.keys + " keys deleted.");
}

// overrideSubject returns the subject of an override's change, which names one policy, or, having
// said what is missing, null.
function overrideSubject() {
  const s = subject();
  if (s && !s.policy) {
    showResult("An override is of one policy: choose it.", "error");
    $("policy").focus();
    return null;
  }
  return s;
}

function setOverride() {
  const s = overrideSubject();
  if (!s) {
    return;
  }
  const limit = Number($("ov-limit").value);
  if (!Number.isInteger(limit) || limit < 1) {
    showResult("Enter the override's limit, a whole number of 1 or more.", "error");
    $("ov-limit").focus();
    return;
  }
  const body = { policy: s.policy, key: s.key, limit: limit };
  if ($("ov-burst").value !== "") {
    body.burst = Number($("ov-burst").value);
  }
  if ($("ov-expires").value.trim() !== "") {
    body.expires_in = $("ov-expires").value.trim();
  }
  if (s.reason) {
    body.reason = s.reason;
  }
  change("Set override", "Set the limit of " + whom(s) + " to " + limit + (body.burst ? " (burst " + body.burst + ")" : "") +
    (body.expires_in ? " for " + body.expires_in : " until deleted") + "? Every instance decides by it from the next request.",
  "PUT", "/v1/overrides", body, (r) => "Override set: " + r.policy + " limit " + r.limit + (r.expires_at ? ", expires " + new Date(r.expires_at).toLocaleString() : ", no expiry") + ".");
}

function deleteOverride() {
  const s = overrideSubject();
  if (!s) {
    return;
  }
  const body = { policy: s.policy, key: s.key };
  if (s.reason) {
    body.reason = s.reason;
  }
  change("Delete override", "Delete the override of " + whom(s) + "? It is decided under the policy's numbers again.",
    "DELETE", "/v1/overrides", body, () => "Override of " + whom(s) + " deleted.");
}

document.addEventListener("DOMContentLoaded", () => {
  $("instance").textContent = location.host;
  $("token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(tokenKey, $("token").value);
    $("token").value = "";
    start();
  });
  $("forget-token").addEventListener("click", () => {
    sessionStorage.removeItem(tokenKey);
    start();
  });
  $("subject-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    inspect();
  });
  $("reset").addEventListener("click", reset);
  $("set-override").addEventListener("click", setOverride);
  $("delete-override").addEventListener("click", deleteOverride);
  $("confirm-yes").addEventListener("click", () => $("confirm").close("yes"));
  $("confirm-no").addEventListener("click", () => $("confirm").close("no"));
  start();
});
