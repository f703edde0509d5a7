// Small DOM and formatting helpers.
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "text") e.textContent = v;
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c == null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

export const SVGNS = "http://www.w3.org/2000/svg";
export function svg(tag, attrs = {}, ...children) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v != null) e.setAttribute(k, v);
  for (const c of children.flat()) if (c != null) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

export function fmtNum(n) {
  if (n == null) return "–";
  if (typeof n !== "number") return String(n);
  if (Number.isInteger(n)) return n.toLocaleString("en-US");
  return n.toLocaleString("en-US", { maximumFractionDigits: 3 });
}

export function fmtBytes(n) {
  if (n == null) return "–";
  const u = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${u[i]}`;
}

export function fmtDuration(ms) {
  if (ms == null || ms < 0) return "–";
  const s = ms / 1000;
  if (s < 1) return `${Math.round(ms)} ms`;
  if (s < 60) return `${s.toFixed(1)} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d ${Math.round((s % 86400) / 3600)} h`;
}

export function shortTime(iso) {
  return iso ? iso.replace("T", " ").replace(/:00\.000Z$|\.000Z$|Z$/, "") : "–";
}

export function highlightJSON(value) {
  const text = JSON.stringify(value, null, 2);
  const pre = el("pre", { class: "json" });
  const re = /("(?:\\.|[^"\\])*")(\s*:)?|\b(true|false|null)\b|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)/g;
  let last = 0;
  for (const m of text.matchAll(re)) {
    pre.append(text.slice(last, m.index));
    const cls = m[1] ? (m[2] ? "k" : "s") : m[3] ? "b" : "n";
    pre.append(el("span", { class: cls }, m[1] || m[3] || m[4]));
    if (m[2]) pre.append(m[2]);
    last = m.index + m[0].length;
  }
  pre.append(text.slice(last));
  return pre;
}

export function showModal(title, body) {
  const modal = document.getElementById("modal");
  document.getElementById("modal-title").textContent = title;
  const b = document.getElementById("modal-body");
  b.replaceChildren(body);
  modal.classList.remove("hidden");
}

export function hideModal() {
  document.getElementById("modal").classList.add("hidden");
}

export function errorBox(err) {
  const box = el("div", { class: "error-box", role: "alert" });
  box.append(el("div", { class: "msg" }, err.message || String(err)));
  if (err.body) box.append(highlightJSON(err.body));
  else if (err.status) box.append(el("div", { class: "muted" }, `HTTP ${err.status}`));
  return box;
}
