// Query: a schema browser (datasources → columns with types; click inserts), the Druid SQL editor, run
// (Ctrl+Enter) / EXPLAIN / cancel (only while a query runs), results table + chart, CSV download, and a
// local query history (this browser's localStorage: the last HISTORY_SIZE statements).
import { request, newId, ApiError, postJSON } from "./api.js";
import { el, errorBox, fmtNum } from "./util.js";
import { createEditor } from "./sql-editor.js";
import { renderChart } from "./chart.js";

const LAST_KEY = "radstack.lastQuery";
const HISTORY_KEY = "radstack.queryHistory";
const HISTORY_SIZE = 30;
let last = null; // the last result, kept across view switches

export function loadHistory() {
  try {
    const h = JSON.parse(localStorage.getItem(HISTORY_KEY) || "[]");
    return Array.isArray(h) ? h : [];
  } catch { return []; }
}

function remember(entry) { // newest first; the same statement again moves up instead of repeating
  const h = [entry, ...loadHistory().filter((e) => e.sql !== entry.sql)].slice(0, HISTORY_SIZE);
  localStorage.setItem(HISTORY_KEY, JSON.stringify(h));
}

// a name as SQL needs it: bare when it is a plain identifier, else double-quoted
export function sqlName(name) {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(name) ? name : `"${name.replace(/"/g, '""')}"`;
}

async function sqlRows(query, parameters = []) {
  return postJSON("/druid/v2/sql", { query, parameters, resultFormat: "array" });
}

function schemaPanel(insert) {
  const list = el("div", { id: "schema-list" }, el("p", { class: "muted" }, "Loading…"));
  const panel = el("div", { class: "panel schema", id: "schema" }, el("h2", {}, "Datasources"), list);
  sqlRows("SELECT TABLE_NAME FROM INFORMATION_SCHEMA.TABLES WHERE TABLE_SCHEMA = 'druid' ORDER BY 1").then((rows) => {
    if (!rows.length) { list.replaceChildren(el("p", { class: "muted" }, "No datasource you may read.")); return; }
    list.replaceChildren(...rows.map(([ds]) => {
      const cols = el("ul", { class: "columns" });
      const details = el("details", { "data-datasource": ds },
        el("summary", {}, el("span", { class: "ds-name", title: "click the name to insert it", onclick: (e) => { e.preventDefault(); insert(sqlName(ds)); } }, ds)), cols);
      details.addEventListener("toggle", () => {
        if (!details.open || cols.childElementCount) return;
        sqlRows("SELECT COLUMN_NAME, DATA_TYPE FROM INFORMATION_SCHEMA.COLUMNS WHERE TABLE_SCHEMA = 'druid' AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
          [{ type: "VARCHAR", value: ds }]).then((cs) => cols.replaceChildren(...cs.map(([c, t]) =>
          el("li", { class: "clickable", "data-column": c, title: "click to insert", onclick: () => insert(sqlName(c)) }, c, el("span", { class: "muted" }, ` ${t}`)))))
          .catch((e) => cols.replaceChildren(el("li", {}, errorBox(e))));
      });
      return details;
    }));
  }).catch((e) => list.replaceChildren(errorBox(e)));
  return panel;
}

function historyPanel(load) {
  const panel = el("div", { class: "panel", id: "history" });
  const render = () => {
    const h = loadHistory();
    panel.replaceChildren(el("h2", {}, "History"), h.length
      ? el("ol", { class: "history" }, h.map((e) => el("li", { class: "clickable", title: "click to load it into the editor", onclick: () => load(e.sql) },
        el("code", {}, e.sql.length > 160 ? `${e.sql.slice(0, 159)}…` : e.sql),
        el("span", { class: "muted" }, `  ${new Date(e.at).toLocaleString()} · ${e.ok ? `${fmtNum(e.rows)} rows in ${fmtNum(e.ms)} ms` : "failed"}`))))
      : el("p", { class: "muted" }, "Queries you run are kept here, in this browser only."));
  };
  render();
  return { element: panel, render };
}

export async function queryView(main, { params }) {
  const initial = params.get("sql") || localStorage.getItem(LAST_KEY) ||
    "SELECT datasource, COUNT(*) AS segments, SUM(num_rows) AS \"rows\"\nFROM sys.segments\nWHERE is_active = 1\nGROUP BY 1\nORDER BY 3 DESC";
  const runBtn = el("button", { id: "run" }, "Run");
  const explainBtn = el("button", { id: "explain", class: "ghost", title: "EXPLAIN PLAN FOR the statement" }, "Explain");
  const cancelBtn = el("button", { id: "cancel", class: "danger", hidden: true }, "Cancel"); // shown while a query runs
  const csvBtn = el("button", { id: "csv", class: "ghost", disabled: true }, "Download CSV");
  const info = el("span", { class: "info", id: "query-info" });
  const out = el("div", { id: "query-output" });
  const editor = createEditor(initial, { onRun: () => run() });
  const history = historyPanel((sql) => { editor.value = sql; editor.focus(); });
  main.append(el("h1", {}, "Query"),
    el("div", { class: "query-layout" }, schemaPanel((text) => editor.insert(text)),
      el("div", { class: "grow" },
        el("div", { class: "panel" }, editor.element,
          el("div", { class: "row querybar" }, runBtn, explainBtn, cancelBtn, el("span", { class: "muted" }, el("kbd", {}, "Ctrl"), "+", el("kbd", {}, "Enter"), " runs"),
            el("div", { class: "grow" }), info, csvBtn)),
        out, history.element)));

  let running = null;
  async function run({ explain = false } = {}) {
    if (running) return;
    const statement = editor.value;
    const sql = explain ? `EXPLAIN PLAN FOR ${statement}` : statement;
    localStorage.setItem(LAST_KEY, statement);
    const id = newId();
    const controller = new AbortController();
    running = { id, controller };
    runBtn.disabled = true; explainBtn.disabled = true; cancelBtn.hidden = false; csvBtn.disabled = true;
    info.textContent = "running…";
    out.replaceChildren();
    const t0 = performance.now();
    try {
      const res = await request("/druid/v2/sql", { method: "POST", signal: controller.signal,
        body: { query: sql, resultFormat: "array", header: true, typesHeader: true, sqlTypesHeader: true, context: { sqlQueryId: id } } });
      const text = await res.text();
      const ms = performance.now() - t0;
      let json = null;
      try { json = JSON.parse(text); } catch { /* not JSON */ }
      if (!res.ok || !Array.isArray(json)) throw new ApiError(res.status, json, text || "The result could not be read");
      const [names, types, sqlTypes, ...rows] = json;
      const columns = names.map((n, i) => ({ name: n, type: types[i], sqlType: sqlTypes[i] }));
      last = { columns, rows, ms, id: res.headers.get("X-Druid-SQL-Query-Id") || id, sql: statement, explain };
      if (!explain) remember({ sql: statement, at: Date.now(), ok: true, rows: rows.length, ms: Math.round(ms) });
      show(last);
    } catch (e) {
      const ms = performance.now() - t0;
      const cancelled = e.name === "AbortError" || e.body?.category === "CANCELED";
      info.textContent = `${cancelled ? "cancelled" : "failed"} after ${fmtNum(Math.round(ms))} ms`;
      out.replaceChildren(errorBox(e.name === "AbortError" ? new Error("Query cancelled (the request was aborted)") : e));
      if (!explain) remember({ sql: statement, at: Date.now(), ok: false, rows: 0, ms: Math.round(ms) });
      last = null;
    } finally {
      running = null;
      runBtn.disabled = false; explainBtn.disabled = false; cancelBtn.hidden = true;
      history.render();
    }
  }

  async function cancel() {
    if (!running) return;
    const { id, controller } = running;
    info.textContent = "cancelling…";
    try {
      await request(`/druid/v2/sql/${encodeURIComponent(id)}`, { method: "DELETE" });
    } catch { /* the POST reports what happened */ }
    // The broker answers the running POST with Druid's "Query cancelled" error; if it does not
    // within two seconds (e.g. results already streaming), stop waiting for it.
    setTimeout(() => { if (running && running.id === id) controller.abort(); }, 2000);
  }

  function show(result) {
    info.textContent = `${fmtNum(result.rows.length)} row${result.rows.length === 1 ? "" : "s"} in ${fmtNum(Math.round(result.ms))} ms`;
    csvBtn.disabled = false;
    if (result.explain) { // one row: PLAN (native query JSON), RESOURCES, ATTRIBUTES
      out.replaceChildren(el("div", { class: "panel", id: "explain-output" }, el("h2", {}, "Plan"),
        ...result.columns.map((c, i) => el("div", {}, el("h3", {}, c.name), el("pre", { class: "json" }, pretty(result.rows[0]?.[i]))))));
      return;
    }
    const chart = el("div", { class: "chart", id: "chart" });
    const table = resultTable(result);
    out.replaceChildren(el("div", { class: "panel" }, el("h2", {}, "Chart"), chart),
      el("div", { class: "panel" }, el("h2", {}, "Results"), el("div", { class: "scroll" }, table)));
    renderChart(chart, result.columns, result.rows);
  }

  runBtn.addEventListener("click", () => run());
  explainBtn.addEventListener("click", () => run({ explain: true }));
  cancelBtn.addEventListener("click", cancel);
  csvBtn.addEventListener("click", () => { if (last) downloadCsv(last); });
  if (last && last.sql === editor.value && !last.explain) show(last);
  editor.focus();
  return null;
}

function pretty(v) {
  if (typeof v !== "string") return JSON.stringify(v, null, 2);
  try { return JSON.stringify(JSON.parse(v), null, 2); } catch { return v; }
}

function resultTable({ columns, rows }) {
  const numeric = columns.map((c) => ["LONG", "FLOAT", "DOUBLE"].includes(c.type) && !["TIMESTAMP", "DATE"].includes(c.sqlType));
  const head = el("tr", {}, columns.map((c, i) => el("th", { class: numeric[i] ? "num" : "", title: `${c.sqlType} (${c.type})` }, c.name)));
  const body = rows.slice(0, 5000).map((r) => el("tr", {}, r.map((v, i) => v == null
    ? el("td", { class: "null" }, "null")
    : el("td", { class: numeric[i] ? "num" : "" }, typeof v === "number" ? fmtNum(v) : typeof v === "object" ? JSON.stringify(v) : String(v)))));
  return el("table", { class: "grid", id: "results" }, el("thead", {}, head), el("tbody", {}, body));
}

export function toCsv(columns, rows) {
  const cell = (v) => {
    if (v == null) return "";
    let s = typeof v === "object" ? JSON.stringify(v) : String(v);
    // a text cell a spreadsheet would run as a formula (=, +, -, @, tab, CR first) is kept as text
    if (typeof v === "string" && /^[=+\-@\t\r]/.test(s)) s = `'${s}`;
    return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
  };
  return [columns.map((c) => cell(c.name)).join(","), ...rows.map((r) => r.map(cell).join(","))].join("\r\n") + "\r\n";
}

function downloadCsv({ columns, rows, id }) {
  const blob = new Blob([toCsv(columns, rows)], { type: "text/csv;charset=utf-8" });
  const a = el("a", { href: URL.createObjectURL(blob), download: `query-${id}.csv` });
  document.body.append(a);
  a.click();
  setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
}
