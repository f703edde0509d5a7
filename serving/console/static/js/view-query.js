// Query: Druid SQL editor, run (Ctrl+Enter) / cancel, results table + chart, CSV download.
import { request, newId, ApiError } from "./api.js";
import { el, errorBox, fmtNum } from "./util.js";
import { createEditor } from "./sql-editor.js";
import { renderChart } from "./chart.js";

const LAST_KEY = "radstack.lastQuery";
let last = null; // the last result, kept across view switches

export async function queryView(main, { params }) {
  const initial = params.get("sql") || localStorage.getItem(LAST_KEY) ||
    "SELECT datasource, COUNT(*) AS segments, SUM(num_rows) AS \"rows\"\nFROM sys.segments\nWHERE is_active = 1\nGROUP BY 1\nORDER BY 3 DESC";
  const runBtn = el("button", { id: "run" }, "Run");
  const cancelBtn = el("button", { id: "cancel", class: "danger", disabled: true }, "Cancel");
  const csvBtn = el("button", { id: "csv", class: "ghost", disabled: true }, "Download CSV");
  const info = el("span", { class: "info", id: "query-info" });
  const out = el("div", { id: "query-output" });
  const editor = createEditor(initial, { onRun: () => run() });
  main.append(el("h1", {}, "Query"),
    el("div", { class: "panel" }, editor.element,
      el("div", { class: "row querybar" }, runBtn, cancelBtn, el("span", { class: "muted" }, el("kbd", {}, "Ctrl"), "+", el("kbd", {}, "Enter"), " runs"),
        el("div", { class: "grow" }), info, csvBtn)),
    out);

  let running = null;
  async function run() {
    if (running) return;
    const sql = editor.value;
    localStorage.setItem(LAST_KEY, sql);
    const id = newId();
    const controller = new AbortController();
    running = { id, controller };
    runBtn.disabled = true; cancelBtn.disabled = false; csvBtn.disabled = true;
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
      last = { columns, rows, ms, id: res.headers.get("X-Druid-SQL-Query-Id") || id, sql };
      show(last);
    } catch (e) {
      const ms = performance.now() - t0;
      const cancelled = e.name === "AbortError" || e.body?.category === "CANCELED";
      info.textContent = `${cancelled ? "cancelled" : "failed"} after ${fmtNum(Math.round(ms))} ms`;
      out.replaceChildren(errorBox(e.name === "AbortError" ? new Error("Query cancelled (the request was aborted)") : e));
      last = null;
    } finally {
      running = null;
      runBtn.disabled = false; cancelBtn.disabled = true;
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
    const chart = el("div", { class: "chart", id: "chart" });
    const table = resultTable(result);
    out.replaceChildren(el("div", { class: "panel" }, el("h2", {}, "Chart"), chart),
      el("div", { class: "panel" }, el("h2", {}, "Results"), el("div", { class: "scroll" }, table)));
    renderChart(chart, result.columns, result.rows);
  }

  runBtn.addEventListener("click", run);
  cancelBtn.addEventListener("click", cancel);
  csvBtn.addEventListener("click", () => { if (last) downloadCsv(last); });
  if (last && last.sql === editor.value) show(last);
  editor.focus();
  return null;
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
