// The edgelimit dashboard. It reads the admin API beside it (/rate_limit/)
// every 2 seconds, resets keys through it, and changes rules through
// Caddy's /config/ API. Every URL is relative to this page, so the page
// works wherever the admin endpoint is reached and asks no other host.
// Caddy's admin checks the Origin (or Referer) of a browser's requests:
// the browser sends the page's own, which is the endpoint's.
"use strict";

const api = new URL("../", location.href); // /rate_limit/
const configRoot = new URL("../../config/", location.href); // Caddy's /config/
// On a site (the rate_limit_ui handler, wherever its route mounts it), the
// page asks its own URL, the route in a query parameter: ?api=rules/NAME
// for the admin API's /rate_limit/rules/NAME, ?config=PATH for /config/.
const site = document.documentElement.hasAttribute("data-site");
// canWrite: the page may change things (overrides: their form and Remove
// buttons). Always on the admin endpoint; on a site with rate_limit_ui
// write, which marks the page data-write.
const canWrite = !site || document.documentElement.hasAttribute("data-write");

// siteURL is this page's URL with one query parameter.
function siteURL(param, value) {
  const u = new URL(location.pathname, location.href);
  u.searchParams.set(param, value);
  return u;
}

// apiURL is the URL of an admin API route: rest is its path after
// /rate_limit/ (percent-encoded segments), with any query.
const apiURL = (rest = "") => (site ? siteURL("api", rest) : new URL(rest, api));
// cfgURL is the URL of a path of Caddy's config ("" for all of it).
const cfgURL = (rest = "") => (site ? siteURL("config", rest) : new URL(rest, configRoot));
const pollEvery = 2000; // ms between reads of the admin API
const keepFor = 5 * 60 * 1000; // ms of traffic the charts show

// series are the lines of a chart: per-second rates of a rule's counts.
const series = [
  { label: "allowed", color: "--allowed" },
  { label: "denied", color: "--denied" },
  { label: "shadow denied", color: "--shadow", dash: [5, 3] },
];

const state = {
  overview: null, // GET /rate_limit/
  cluster: null, // GET /rate_limit/cluster
  history: new Map(), // rule name → samples {t, v: [allowed, denied, shadow_denied]}, cumulative
  view: { page: "overview" }, // or {page: "rule", rule: NAME}
  top: null, // the rule page's {requests, denied} top keys
  key: null, // the rule page's key: {rule, key, view} or {rule, key, missing}
  edit: null, // the edit form's rule in the config: {rule, etag, config, found}
  overrides: null, // the rule page's overrides: {rule, view} or {rule, error}
};
const cards = new Map(); // rule name → its overview card

// --- small helpers ---

const $ = (id) => document.getElementById(id);

// el makes an element: props are attributes (class, data-*, on* handlers).
function el(tag, props, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v === true) e.setAttribute(k, "");
    else if (v !== false && v != null) e.setAttribute(k, v);
  }
  for (const c of children.flat()) if (c != null && c !== false) e.append(c);
  return e;
}

// call sends a request and returns {data, resp}; it throws the admin's
// {"error": …} message, with the status, for any answer but 2xx.
async function call(method, url, body, headers = {}) {
  const init = { method, headers: { ...headers }, cache: "no-store" };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers["Content-Type"] = "application/json"; // /config/ wants it
  }
  const resp = await fetch(url, init);
  const text = await resp.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!resp.ok) {
    const err = new Error((data && data.error) || (data === null && text.trim()) || `${resp.status} ${resp.statusText}`);
    err.status = resp.status;
    throw err;
  }
  return { data, resp };
}

const seg = encodeURIComponent; // a rule name or key as one path segment
const ruleURL = (rule, rest = "") => apiURL(`rules/${seg(rule)}${rest}`);
// escaped: the key is the admin API's percent-escaped form of one that is
// not UTF-8 text, already a path segment.
const keyURL = (rule, key, escaped, rest = "") => ruleURL(rule, `/keys/${escaped ? key : seg(key)}${rest}`);

const num = (n) => Number(n).toLocaleString("en-US");
const rate = (r) => (r >= 10 ? Math.round(r).toString() : String(+r.toFixed(2)));

// showKey makes a key readable: the parts of a composite key joined by " · ",
// other control characters escaped.
const showKey = (k) =>
  k.replace(/[\x00-\x1f]/g, (c) => (c === "\x1f" ? " · " : "\\x" + c.charCodeAt(0).toString(16).padStart(2, "0")));

// windowText writes a window in nanoseconds as Caddy reads it (1h, 90s).
function windowText(ns) {
  if (typeof ns === "string") return ns;
  for (const [d, unit] of [[864e11, "d"], [36e11, "h"], [6e10, "m"], [1e9, "s"], [1e6, "ms"]]) {
    if (ns % d === 0) return ns / d + unit;
  }
  return ns + "ns";
}

// duration writes seconds for a person: 45 s, 12 min, 5 h 20 min, 3 d.
function duration(sec) {
  if (sec < 120) return `${rate(sec)} s`;
  if (sec < 7200) return `${Math.round(sec / 60)} min`;
  if (sec < 172800) return `${Math.floor(Math.round(sec / 60) / 60)} h ${Math.round(sec / 60) % 60} min`;
  return `${Math.round(sec / 86400)} d`;
}

function setStatus(text, bad) {
  const s = $("status");
  s.textContent = text;
  s.classList.toggle("bad", !!bad);
}

// --- traffic history and charts ---

function record(rules, t) {
  for (const r of rules) {
    let h = state.history.get(r.name);
    if (!h) state.history.set(r.name, (h = []));
    const q = r.requests;
    h.push({ t, v: [q.allowed, q.denied, q.shadow_denied] });
    while (h.length > 2 && h[1].t < t - keepFor) h.shift(); // one sample before the window: the first rate
  }
  for (const name of state.history.keys()) {
    if (!rules.some((r) => r.name === name)) state.history.delete(name);
  }
}

// rates are the per-second rates between successive samples; a gap in the
// samples (the API did not answer) starts a new line.
function rates(h) {
  const out = [];
  for (let i = 1; i < h.length; i++) {
    const dt = (h[i].t - h[i - 1].t) / 1000;
    if (dt <= 0) continue;
    const gap = dt > (3 * pollEvery) / 1000;
    out.push({ t: h[i].t, gap, v: h[i].v.map((n, j) => Math.max(0, n - h[i - 1].v[j]) / dt) });
  }
  return out;
}

// scale is the top of a chart's axis, the smallest of 1, 2, 2.5, 5 × 10^k
// at or above v (1 at least), and the number of steps up to it, each a
// round number.
function scale(v) {
  const p = 10 ** Math.floor(Math.log10(Math.max(v, 1)));
  const m = [1, 2, 2.5, 5, 10].find((m) => m * p >= v);
  return { top: m * p, steps: m === 1 || m === 2 ? 4 : 5 };
}

// drawChart draws the last 5 minutes of rates on a canvas, at its size on
// the page and the screen's pixel density.
function drawChart(canvas, points, now) {
  const w = canvas.clientWidth, h = canvas.clientHeight, dpr = window.devicePixelRatio || 1;
  if (!w || !h) return;
  if (canvas.width !== Math.round(w * dpr)) canvas.width = Math.round(w * dpr);
  if (canvas.height !== Math.round(h * dpr)) canvas.height = Math.round(h * dpr);
  const g = canvas.getContext("2d");
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  const css = getComputedStyle(canvas);
  const color = (name) => css.getPropertyValue(name).trim();
  const left = 40, right = 10, top = 8, bottom = 18;
  const pw = w - left - right, ph = h - top - bottom, start = now - keepFor;
  const { top: ymax, steps } = scale(Math.max(0, ...points.flatMap((p) => p.v)));
  const x = (t) => left + ((t - start) / keepFor) * pw;
  const y = (v) => top + ph - (v / ymax) * ph;

  g.font = `11px ${css.fontFamily}`;
  g.lineWidth = 1;
  g.strokeStyle = color("--grid");
  g.fillStyle = color("--muted");
  g.textAlign = "right";
  g.textBaseline = "middle";
  for (let i = 0; i <= steps; i++) {
    const v = (ymax * i) / steps, yy = Math.round(y(v)) + 0.5;
    g.beginPath();
    g.moveTo(left, yy);
    g.lineTo(w - right, yy);
    g.stroke();
    g.fillText(`${rate(v)}/s`, left - 5, yy);
  }
  g.textBaseline = "top";
  for (let m = 5; m >= 0; m--) {
    g.textAlign = m === 5 ? "left" : m === 0 ? "right" : "center";
    g.fillText(m ? `−${m}m` : "now", x(now - m * 60000), h - bottom + 4);
  }

  g.save();
  g.beginPath();
  g.rect(left, top - 2, pw, ph + 4);
  g.clip();
  series.forEach((s, i) => {
    if (i === 2 && !points.some((p) => p.v[2] > 0)) return;
    g.strokeStyle = color(s.color);
    g.lineWidth = 1.75;
    g.lineJoin = "round";
    g.setLineDash(s.dash || []);
    g.beginPath();
    points.forEach((p, j) => (j === 0 || p.gap ? g.moveTo(x(p.t), y(p.v[i])) : g.lineTo(x(p.t), y(p.v[i]))));
    g.stroke();
    g.fillStyle = g.strokeStyle; // a point alone (the first, or after a gap) has no line: a dot
    points.forEach((p, j) => {
      const next = points[j + 1];
      if ((j === 0 || p.gap) && (!next || next.gap)) g.fillRect(x(p.t) - 1.5, y(p.v[i]) - 1.5, 3, 3);
    });
  });
  g.restore();
}

// legend is the current rates, as text beside a chart (and its label).
function legend(points) {
  const last = points.length ? points[points.length - 1].v : [0, 0, 0];
  return series
    .filter((s, i) => i < 2 || points.some((p) => p.v[2] > 0))
    .map((s, i) =>
      el("span", { class: "item", "data-series": s.label },
        el("span", { class: `swatch ${s.color.slice(2)}` }), `${s.label} ${rate(last[i])}/s`));
}

function chart(canvas, legendBox, rule, now) {
  const points = rates(state.history.get(rule) || []);
  drawChart(canvas, points, now);
  const items = legend(points);
  legendBox.replaceChildren(...items);
  canvas.setAttribute("aria-label", `requests per second, last 5 minutes: ${items.map((i) => i.textContent).join(", ")}`);
}

// --- the overview ---

// facts describes a rule: a list of term, value pairs, each value tagged
// with data-field for the page's tests.
function facts(r) {
  const c = r.config || {};
  const rows = r.limits.length || !c.max_concurrent ? [
    ["limits", r.limits.map((l) => `${num(l.count)} / ${l.window}`).join(" and ")],
    ["algorithm", r.algorithm],
  ] : [];
  if (c.max_concurrent) {
    rows.push(["max concurrent", `${num(c.max_concurrent)} per key`]);
    rows.push(["in flight", num(r.in_flight || 0)]);
    const busiest = (r.busiest_in_flight || []).map((k) => `${k.key} ${num(k.in_flight)}`).join(", ");
    if (busiest) rows.push(["busiest in flight", busiest]);
  }
  if (r.burst) rows.push(["burst", num(r.burst)]);
  if (c.geo_multiplier) {
    const geo = Object.entries(c.geo_multiplier).sort(([a], [b]) => (a === "default") - (b === "default") || a.localeCompare(b));
    rows.push(["geo", geo.map(([cc, f]) => `${cc} ×${f}`).join(", ")]);
  }
  if (c.tiers) rows.push(["tiers", Object.keys(c.tiers).sort().join(", ")]);
  if (c.shadow) rows.push(["shadow", "on: never rejects"]);
  if (c.block_for) rows.push(["blocks", `${c.block_for.map((ns) => windowText(ns)).join(", then ")} after a denial`]);
  if (c.store === "redis") {
    rows.push(["store", `redis: one limit for every node; ${c.on_store_error || "local"} when it cannot decide`]);
    rows.push(["keys", `in Redis; ${num(r.keys)} in this node's fallback`]);
  } else {
    rows.push(["keys", `${num(r.keys)} of ${num(r.max_keys)}`]);
  }
  if (r.evictions) rows.push(["evictions", num(r.evictions)]);
  rows.push(["allowed", num(r.requests.allowed)], ["denied", num(r.requests.denied)]);
  if (r.requests.shadow_denied || c.shadow) rows.push(["shadow denied", num(r.requests.shadow_denied)]);
  if (r.requests.exempt) rows.push(["exempt", num(r.requests.exempt)]);
  return rows.flatMap(([term, value]) => [el("dt", {}, term), el("dd", { "data-field": term }, value)]);
}

function card(name) {
  const link = el("a", { href: `#/rules/${seg(name)}` }, name);
  const box = el("article", { class: "card", "data-rule": name },
    el("h2", {}, link),
    el("div", { class: "chart-box" }, el("canvas", { class: "chart", role: "img" }), el("div", { class: "legend" })),
    el("dl", { class: "facts" }));
  cards.set(name, box);
  return box;
}

function renderOverview(now) {
  const rules = state.overview ? state.overview.rules : [];
  $("no-rules").hidden = !state.overview || rules.length > 0;
  const list = $("cards");
  for (const r of rules) {
    const box = cards.get(r.name) || card(r.name);
    list.append(box); // in the API's order
    box.querySelector("dl").replaceChildren(...facts(r));
    chart(box.querySelector("canvas"), box.querySelector(".legend"), r.name, now);
  }
  for (const [name, box] of cards) {
    if (!rules.some((r) => r.name === name)) {
      box.remove();
      cards.delete(name);
    }
  }
  renderCluster();
  renderSnapshots(now);
}

// renderSnapshots says when the rules' counters were last written to
// Caddy's storage (persist_interval), and the last error if any.
function renderSnapshots(now) {
  const s = state.overview && state.overview.snapshots, box = $("snapshots");
  box.hidden = !(s && s.enabled);
  if (box.hidden) return;
  const last = s.last_success ? `last written ${Math.max(0, Math.round((now - Date.parse(s.last_success)) / 1000))} s ago (took ${s.last_duration})` : "not written yet";
  box.className = s.errors > 0 && !s.last_success ? "warn" : "note";
  box.textContent = `Snapshots to storage every ${s.interval}: ${last} · ${num(s.writes)} writes, ${num(s.errors)} errors` +
    (s.last_error ? ` · last error: ${s.last_error}` : "");
}

function renderCluster() {
  const c = state.cluster, box = $("cluster");
  box.hidden = !(c && c.enabled);
  if (box.hidden) return;
  const rows = c.members.map((m) =>
    el("tr", { "data-member": m.name },
      el("td", {}, el("span", { class: `dot ${m.state}` }), m.name, m.self ? " (this node)" : ""),
      el("td", {}, m.addr),
      el("td", { "data-field": "state" }, m.state),
      el("td", {}, m.since ? new Date(m.since).toLocaleTimeString() : "")));
  box.replaceChildren(
    el("h2", {}, "Cluster"),
    el("p", { class: c.minority ? "warn" : "note" },
      `${c.live} of ${c.size} nodes live · sync every ${c.sync_interval} · on partition: ${c.on_partition} · ${num(c.tracked_keys)} hot keys tracked`,
      c.minority ? " · this node is in a minority: on_partition applies" : ""),
    el("div", { class: "scroll" },
      el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "node"), el("th", {}, "address"), el("th", {}, "state"), el("th", {}, "since"))),
        el("tbody", {}, rows))));
}

// --- a rule's page ---

const currentRule = () => state.overview && state.overview.rules.find((r) => r.name === state.view.rule);

function renderRule(now) {
  const r = currentRule();
  $("rule-name").textContent = state.view.rule;
  if (!r) {
    $("rule-facts").replaceChildren(el("dd", {}, state.overview ? "No rule of this name is loaded." : "…"));
    return;
  }
  $("rule-facts").replaceChildren(...facts(r));
  $("top-scope").textContent = (r.config || {}).store === "redis"
    ? "As this node saw them; a key's state below is read from Redis."
    : "";
  chart($("rule-chart"), $("rule-legend"), r.name, now);
  for (const by of ["requests", "denied"]) {
    const view = state.top && state.top[by];
    // the network column, when a key of the list has one (asn_db)
    const nets = !!view && view.keys.some((k) => k.asn);
    const rows = view ? view.keys.map((k) =>
      el("tr", { "data-key": k.key },
        el("td", {}, el("button", { type: "button", class: "link", onclick: () => lookupKey(k.key, undefined, k.escaped) }, showKey(k.key))),
        nets ? el("td", { "data-field": "asn", title: k.asn_org || null }, k.asn ? `${k.asn} ${k.asn_org || ""}`.trim() : "") : null,
        el("td", { class: "num", title: k.error ? `between ${num(k.count - k.error)} and ${num(k.count)}` : null },
          k.error ? `≤ ${num(k.count)}` : num(k.count)))) : [];
    if (view && !rows.length) rows.push(el("tr", {}, el("td", { colspan: 2, class: "note" }, by === "denied" ? "no denials" : "no requests")));
    const table = $(`top-${by}`);
    table.querySelector("th.asn").hidden = !nets;
    table.tBodies[0].replaceChildren(...rows);
  }
  renderBlocked(r);
  renderOverrides(now);
  renderKey(r);
}

// renderBlocked lists the keys a rule with block_for blocks now, each
// with a button that lifts its block (and resets its counters).
function renderBlocked(r) {
  const panel = $("blocked-panel");
  panel.hidden = !(r.config || {}).block_for;
  if (panel.hidden) return;
  const keys = (state.blocked && state.blocked.keys) || [];
  const rows = keys.map((k) =>
    el("tr", { "data-key": k.key },
      el("td", {}, el("button", { type: "button", class: "link", onclick: () => lookupKey(k.key, undefined, k.escaped) }, showKey(k.key))),
      el("td", { class: "num" }, num(k.offences)),
      el("td", { class: "num" }, duration(k.retry_after_seconds)),
      el("td", {}, el("button", { type: "button", class: "danger lift", onclick: () => liftKey(k) }, "Lift"))));
  if (!rows.length) rows.push(el("tr", {}, el("td", { colspan: 4, class: "note" }, state.blocked ? "no key is blocked" : "…")));
  $("blocked").tBodies[0].replaceChildren(...rows);
}

// liftKey lifts a key's block through DELETE …/keys/{key} (which resets
// its counters too, on every node of a cluster).
async function liftKey(k) {
  const rule = state.view.rule;
  if (!confirm(`Lift the block of key ${showKey(k.key)} of rule ${rule}? Its counters start afresh.`)) return;
  let note;
  try {
    await call("DELETE", keyURL(rule, k.key, k.escaped));
    note = "Block lifted.";
  } catch (e) {
    note = `Lifting the block failed: ${e.message}`;
  }
  await Promise.all([lookupKey(k.key, note, k.escaped), refreshTop()]);
  render();
}

async function refreshTop() {
  const rule = state.view.rule;
  try {
    const r = currentRule();
    const blocks = r && (r.config || {}).block_for;
    const [req, den, blocked] = await Promise.all([
      ...["requests", "denied"].map((by) => call("GET", ruleURL(rule, `/keys?top=10&by=${by}`))),
      blocks ? call("GET", ruleURL(rule, "/blocked")) : null]);
    if (state.view.rule === rule) {
      state.top = { requests: req.data, denied: den.data };
      state.blocked = blocked ? blocked.data : null;
    }
  } catch {
    if (state.view.rule === rule) state.top = null; // the rule is gone: renderRule says so
  }
}

// --- a rule's overrides ---

// refreshOverrides reads the rule's per-key overrides.
async function refreshOverrides() {
  const rule = state.view.rule;
  let o;
  try {
    o = { rule, view: (await call("GET", ruleURL(rule, "/overrides"))).data };
  } catch (e) {
    o = { rule, error: e.message };
  }
  if (state.view.rule === rule) state.overrides = o;
}

// renderOverrides lists the rule's overrides (key, factor, expiry, who set
// it), each with a Remove button if the page may write; the form that sets
// one shows only then.
function renderOverrides(now) {
  const o = state.overrides && state.overrides.rule === state.view.rule ? state.overrides : null;
  const v = o && o.view;
  $("override-form").hidden = !canWrite;
  $("overrides").querySelector("th.remove").hidden = !canWrite;
  $("overrides-note").textContent = !o ? "…"
    : o.error ? `Cannot read the overrides: ${o.error}`
    : `A key's limits × its factor (0 refuses the key). ${num(v.overrides.length)} of at most ${num(v.max_overrides)}.` +
      (canWrite ? "" : " This dashboard is read-only: changes need rate_limit_ui write.");
  const rows = v ? v.overrides.map((x) => {
    const left = x.expires ? (Date.parse(x.expires) - now) / 1000 : null;
    return el("tr", { "data-key": x.key },
      el("td", { "data-field": "key" }, showKey(x.key)),
      el("td", { class: "num", "data-field": "factor" }, `×${x.factor}`),
      el("td", { "data-field": "expires", title: x.expires || null }, left === null ? "never" : left > 0 ? `in ${duration(left)}` : "now"),
      el("td", { "data-field": "set_by", title: x.set_at ? `set at ${x.set_at}` : null }, x.set_by || ""),
      canWrite ? el("td", {}, el("button", { type: "button", class: "danger remove", onclick: () => removeOverride(x.key) }, "Remove")) : null);
  }) : [];
  if (v && !rows.length) rows.push(el("tr", {}, el("td", { colspan: canWrite ? 5 : 4, class: "note" }, "no overrides")));
  $("overrides").tBodies[0].replaceChildren(...rows);
}

const factorSyntax = /^\d+(\.\d+)?$/;

// setOverride sends the form's override: PUT …/keys/{key}/override with
// {factor, expires_in}. The syntax of each field is checked here; the
// admin API judges the values, and its reason is shown.
async function setOverride(ev) {
  ev.preventDefault();
  const rule = state.view.rule;
  const key = $("override-key").value.trim(), factor = $("override-factor").value.trim(), expires = $("override-expires").value.trim();
  $("override-error").textContent = "";
  $("override-ok").textContent = "";
  let bad = null;
  if (!key) bad = "Key: the key to override, as the rule counts it.";
  else if (!factorSyntax.test(factor)) bad = "Factor: a number ≥ 0, such as 2 or 0.5 (0 refuses the key).";
  else if (expires !== "" && !durationSyntax.test(expires)) bad = "Expires in: a duration such as 30m, 24h or 7d; empty for never.";
  if (bad) {
    $("override-error").textContent = bad;
    return;
  }
  const body = { factor: Number(factor) };
  if (expires !== "") body.expires_in = expires;
  $("override-set").disabled = true;
  try {
    const { data } = await call("PUT", keyURL(rule, key, false, "/override"), body);
    $("override-ok").textContent = `Override set: ${showKey(data.key)} ×${data.factor}` +
      (data.expires ? ` until ${new Date(data.expires).toLocaleString()}.` : ", with no end.");
  } catch (e) {
    $("override-error").textContent = `The override was not set: ${e.message}`;
  }
  $("override-set").disabled = false;
  await refreshOverrides();
  render();
}

// removeOverride asks, then removes key's override: DELETE …/override.
async function removeOverride(key) {
  const rule = state.view.rule;
  if (!confirm(`Remove the override of key ${showKey(key)} of rule ${rule}? Its limits are the rule's again.`)) return;
  $("override-error").textContent = "";
  $("override-ok").textContent = "";
  try {
    await call("DELETE", keyURL(rule, key, false, "/override"));
    $("override-ok").textContent = `Override of ${showKey(key)} removed.`;
  } catch (e) {
    $("override-error").textContent = `The override was not removed: ${e.message}`;
  }
  await refreshOverrides();
  render();
}

// readKey reads a key's state: {rule, key, view}, or {rule, key, missing}
// with "" when the rule holds no state for it (never seen, or reset).
async function readKey(rule, key, escaped) {
  try {
    return { rule, key, escaped, view: (await call("GET", keyURL(rule, key, escaped))).data };
  } catch (e) {
    return { rule, key, escaped, missing: e.status === 404 ? "" : e.message };
  }
}

// lookupKey shows a key's state on the rule's page, with a note above it;
// the page then reads it again at every poll.
async function lookupKey(key, note, escaped) {
  const rule = state.view.rule;
  $("key-input").value = key;
  if (!key) return;
  const k = await readKey(rule, key, escaped);
  if (state.view.rule !== rule) return;
  state.key = { ...k, note };
  renderKey(currentRule());
}

function renderKey(r) {
  const box = $("key-state"), k = state.key;
  if (!k || k.rule !== state.view.rule || !r) {
    box.replaceChildren();
    return;
  }
  const parts = [];
  if (k.note) parts.push(el("p", { class: "ok", role: "status" }, k.note));
  if (k.missing) {
    box.replaceChildren(...parts, el("p", { class: "error" }, k.missing));
    return;
  }
  let limits, summary;
  if (k.view) {
    const v = k.view;
    limits = v.limits.map((l) => ({ limit: l.limit, window: windowText(l.window_seconds * 1e9), used: l.used, remaining: l.remaining, reset: duration(l.reset_seconds) }));
    summary = v.allowed ? "A request from it would pass now." : `A request from it would be denied now: retry after ${duration(v.retry_after_seconds)}.`;
    if (v.blocked_until) summary += ` Blocked until ${new Date(v.blocked_until).toLocaleTimeString()} (offence ${v.offences}).`;
    if (v.asn) summary += ` Network ${v.asn}${v.asn_org ? ` (${v.asn_org})` : ""}.`;
    if (v.country || v.scale !== 1) summary += ` Country ${v.country || "unknown"}, limits ×${v.scale}.`;
  } else {
    limits = r.limits.map((l) => ({ limit: l.count, window: l.window, used: 0, remaining: l.count, reset: "—" }));
    summary = "The rule holds no state for this key: its next request starts afresh.";
  }
  const rows = limits.map((l) =>
    el("tr", {},
      el("td", { class: "num" }, num(l.limit)), el("td", {}, l.window),
      el("td", { class: "num", "data-field": "used" }, num(l.used)),
      el("td", { class: "num", "data-field": "remaining" }, num(l.remaining)),
      el("td", { class: "num" }, l.reset)));
  box.replaceChildren(...parts,
    el("p", { "data-field": "key-summary" }, el("strong", {}, showKey(k.key)), " — ", summary),
    el("div", { class: "scroll" },
      el("table", { class: "state" },
        el("thead", {}, el("tr", {}, ...["limit", "window", "used", "remaining", "resets in"].map((h, i) => el("th", { class: i === 1 ? null : "num" }, h)))),
        el("tbody", {}, rows))),
    el("div", { class: "actions" },
      k.view ? el("button", { type: "button", id: "reset", class: "danger", onclick: resetKey }, "Reset this key") : null,
      canWrite && !k.escaped ? el("button", { type: "button", id: "override-this", class: "secondary", onclick: () => overrideKey(k.key) }, "Override this key…") : null));
}

// overrideKey puts a key in the override form, ready for its factor.
function overrideKey(key) {
  $("override-key").value = key;
  $("override-factor").focus();
}

async function resetKey() {
  const { rule, key, escaped } = state.key;
  const everywhere = state.cluster && state.cluster.enabled ? " on every node of the cluster" : "";
  if (!confirm(`Reset key ${showKey(key)} of rule ${rule}${everywhere}? Its counters start afresh.`)) return;
  let note;
  try {
    const { data } = await call("DELETE", keyURL(rule, key, escaped));
    note = `Key reset${data.cluster ? " on every node" : ""}.` + (data.cluster_error ? ` Some nodes were not reached: ${data.cluster_error}` : "");
  } catch (e) {
    note = `The reset failed: ${e.message}`;
  }
  await Promise.all([lookupKey(key, note, escaped), refreshTop()]);
  render();
}

// --- changing a rule through /config/ ---

// findRules finds the rules named name in a Caddy config: the paths (from
// /config/) of the rate_limit handlers' rules, and the rules.
function findRules(v, name, path = [], out = []) {
  if (Array.isArray(v)) {
    v.forEach((x, i) => findRules(x, name, [...path, String(i)], out));
  } else if (v && typeof v === "object") {
    if (v.handler === "rate_limit" && Array.isArray(v.rules)) {
      v.rules.forEach((r, i) => r && r.name === name && out.push({ path: [...path, "rules", String(i)], rule: r }));
    }
    for (const [k, x] of Object.entries(v)) findRules(x, name, [...path, k], out);
  }
  return out;
}

const at = (v, path) => path.reduce((x, k) => x[k], v);
const configURL = (path) => cfgURL(path.map(seg).join("/"));

async function loadEdit(rule) {
  const form = $("edit-form");
  form.hidden = true;
  $("snippet").hidden = true;
  try {
    const { data, resp } = await call("GET", cfgURL());
    if (state.view.rule !== rule) return;
    state.edit = { rule, etag: resp.headers.get("Etag"), config: data, found: findRules(data, rule) };
  } catch (e) {
    $("edit-note").textContent = `Cannot read the config: ${e.message}`;
    return;
  }
  const { found } = state.edit;
  if (!found.length) {
    $("edit-note").textContent = "This rule is not in Caddy's JSON config (it comes from a rules_file): change it in that file, then reload.";
    return;
  }
  const where = "/config/" + found[0].path.join("/");
  $("edit-note").textContent = found.length === 1 ? `At ${where}.` : `At ${where} and ${found.length - 1} more place(s) sharing its name: all change together.`;
  fillForm(found[0].rule);
  form.hidden = false;
}

function fillForm(r) {
  $("limit-fields").replaceChildren(...(r.limits || []).map((l, i) =>
    el("div", { class: "field" },
      el("label", { for: `count-${i}` }, i ? `Limit ${i + 1}` : "Limit"),
      el("input", { id: `count-${i}`, inputmode: "numeric", autocomplete: "off", value: l.count }),
      el("label", { for: `window-${i}`, class: "per" }, "per"),
      el("input", { id: `window-${i}`, class: "short", autocomplete: "off", spellcheck: "false", value: windowText(l.window) }),
      el("span", { class: "error", id: `count-${i}-error` }),
      el("span", { class: "error", id: `window-${i}-error` }))));
  $("burst-input").value = r.burst ? r.burst : "";
  $("shadow-input").checked = !!r.shadow;
  clearErrors();
}

function clearErrors() {
  for (const e of document.querySelectorAll("#edit-form .error")) e.textContent = "";
  $("form-ok").textContent = "";
}

const durationSyntax = /^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h|d))+$/;

// readForm reads the edit form; client-side it checks only the syntax of
// each field: Caddy judges the values.
function readForm(r) {
  const errors = {}, limits = [];
  (r.limits || []).forEach((l, i) => {
    const count = $(`count-${i}`).value.trim(), win = $(`window-${i}`).value.trim();
    if (!/^\d+$/.test(count)) errors[`count-${i}`] = "a whole number of requests";
    if (!durationSyntax.test(win)) errors[`window-${i}`] = "a duration: 30s, 1m, 1h, 1d";
    limits.push({ count: Number(count), windowText: win, window: win === windowText(l.window) ? l.window : win });
  });
  const burst = $("burst-input").value.trim();
  if (burst !== "" && !/^\d+$/.test(burst)) errors["burst"] = "a whole number; empty for none";
  return { errors, values: { limits, burst: Number(burst || 0), shadow: $("shadow-input").checked } };
}

function apply(r, values) {
  values.limits.forEach((l, i) => Object.assign(r.limits[i], { count: l.count, window: l.window }));
  if (values.burst > 0) r.burst = values.burst;
  else delete r.burst;
  if (values.shadow) r.shadow = true;
  else delete r.shadow;
}

// commonPrefix is the longest path that starts every path.
function commonPrefix(paths) {
  let n = paths[0].length;
  for (const p of paths) while (n > 0 && p.slice(0, n).join("/") !== paths[0].slice(0, n).join("/")) n--;
  return paths[0].slice(0, n);
}

async function saveEdit(ev) {
  ev.preventDefault();
  clearErrors();
  const e = state.edit;
  if (!e || !e.found.length) return;
  const { errors, values } = readForm(e.found[0].rule);
  if (Object.keys(errors).length) {
    for (const [field, msg] of Object.entries(errors)) $(`${field}-error`).textContent = msg;
    return;
  }
  // One PATCH, of the object holding every rule of this name: they must
  // agree on their limits, so they change in one config load. If-Match:
  // a config changed since the form was read is not overwritten.
  const base = commonPrefix(e.found.map((f) => f.path));
  const changed = structuredClone(at(e.config, base));
  for (const f of e.found) apply(at(changed, f.path.slice(base.length)), values);
  $("save").disabled = true;
  try {
    await call("PATCH", configURL(base), changed, e.etag ? { "If-Match": e.etag } : {});
  } catch (err) {
    $("save").disabled = false;
    if (err.status === 412) {
      await loadEdit(e.rule);
      $("form-error").textContent = "The config changed since this page read it. The form shows it now: check, and save again.";
    } else {
      showServerError(err.message, values, e.rule);
    }
    return;
  }
  $("save").disabled = false;
  await loadEdit(e.rule);
  $("form-ok").textContent = "Saved: in force now.";
  showSnippet(values);
  await tick();
}

// showServerError puts Caddy's message beside the field it is about.
function showServerError(msg, values, rule) {
  const i = msg.lastIndexOf("http.handlers.rate_limit: ");
  let short = i >= 0 ? msg.slice(i + "http.handlers.rate_limit: ".length) : msg;
  const prefix = short.match(/^rule \d+ \(/);
  if (prefix && short.startsWith(`${prefix[0]}${rule}): `)) short = short.slice(prefix[0].length + rule.length + 3);
  const row = (pred) => Math.max(0, values.limits.findIndex(pred));
  let field = null, m;
  if ((m = short.match(/^limit (\d+)/))) field = `count-${row((l) => String(l.count) === m[1])}`;
  else if ((m = short.match(/^window (\S+):/))) field = `window-${row((l) => l.windowText === m[1])}`;
  else if ((m = short.match(/invalid duration "?([^"]*)"?/))) field = `window-${row((l) => l.windowText === m[1])}`;
  else if (/^burst|\.burst\b/.test(short)) field = "burst";
  else if (/\.count\b/.test(short)) field = "count-0";
  const box = field && $(`${field}-error`);
  if (box) {
    box.textContent = short;
    box.title = msg;
  } else {
    $("form-error").textContent = msg;
  }
}

function showSnippet(values) {
  const lines = values.limits.map((l) => `limit ${l.count} ${l.windowText}`);
  if (values.burst > 0) lines.push(`burst ${values.burst}`);
  if (values.shadow) lines.push("shadow");
  const json = { limits: values.limits.map((l) => ({ count: l.count, window: l.windowText })) };
  if (values.burst > 0) json.burst = values.burst;
  if (values.shadow) json.shadow = true;
  $("snippet-caddyfile").textContent = `rate_limit … {\n${lines.map((l) => "\t" + l).join("\n")}\n\t…\n}`;
  $("snippet-json").textContent = JSON.stringify(json, null, 2);
  $("snippet").hidden = false;
}

// --- the loop ---

function render() {
  const now = Date.now();
  if (state.view.page === "overview") renderOverview(now);
  else renderRule(now);
}

let timer = null, ticks = 0;

// tick reads the admin API and draws the page, then again 2 s later. A
// tick started while another waits for its answers (after a change) takes
// over: the older one's answers are dropped.
async function tick() {
  const me = ++ticks;
  clearTimeout(timer);
  try {
    const [ov, cl] = await Promise.all([call("GET", apiURL()), call("GET", apiURL("cluster"))]);
    const k = state.view.page === "rule" && state.key;
    const onRule = state.view.page === "rule";
    const [key] = await Promise.all([k ? readKey(k.rule, k.key, k.escaped) : null, onRule ? refreshTop() : null, onRule ? refreshOverrides() : null]);
    if (me !== ticks) return;
    state.overview = ov.data;
    state.cluster = cl.data;
    record(ov.data.rules, Date.now());
    if (key && state.key && state.key.rule === key.rule && state.key.key === key.key) state.key = { ...key, note: state.key.note };
    setStatus(`live · ${new Date().toLocaleTimeString()}`);
  } catch (e) {
    if (me !== ticks) return;
    setStatus(`cannot read the admin API: ${e.message}`, true);
  }
  render();
  timer = setTimeout(tick, pollEvery);
}

function route() {
  let rule = null;
  const m = location.hash.match(/^#\/rules\/(.+)$/);
  if (m) {
    try {
      rule = decodeURIComponent(m[1]);
    } catch {
      rule = null;
    }
  }
  const page = rule === null ? "overview" : "rule";
  if (page !== state.view.page || rule !== state.view.rule) {
    state.top = null;
    state.blocked = null;
    state.key = null;
    state.edit = null;
    state.overrides = null;
    for (const id of ["key-input", "override-key", "override-factor", "override-expires", "override-error", "override-ok"]) {
      const e = $(id);
      if ("value" in e) e.value = "";
      else e.textContent = "";
    }
    $("key-state").replaceChildren();
  }
  state.view = { page, rule };
  $("overview").hidden = page !== "overview";
  $("rule").hidden = page !== "rule";
  $("crumb").textContent = rule === null ? "" : `› ${rule}`;
  document.title = rule === null ? "edgelimit: rate limits" : `edgelimit: ${rule}`;
  if (rule !== null) {
    loadEdit(rule);
    refreshTop().then(render);
    refreshOverrides().then(render);
  }
  render();
}

$("key-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  lookupKey($("key-input").value.trim());
});
$("edit-form").addEventListener("submit", saveEdit);
$("override-form").addEventListener("submit", setOverride);
window.addEventListener("hashchange", route);
window.addEventListener("resize", render);
route();
tick();
