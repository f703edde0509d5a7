// Corrections: how wrong the fast path was, interval by interval — the real-time answer each batch publish
// replaced against the exact one it published (sys.corrections), drawn over time with the gap.
import { postJSON } from "./api.js";
import { renderChart } from "./chart.js";
import { el, errorBox, fmtNum } from "./util.js";

const COLUMNS = ["realtime_events", "batch_events", "event_gap", "late_recovered", "duplicates_removed", "invalid_dropped"];

function sqlString(s) {
  return `'${String(s).replace(/'/g, "''")}'`;
}

async function sql(query) {
  const json = await postJSON("/druid/v2/sql", { query, resultFormat: "array", header: true, typesHeader: true, sqlTypesHeader: true });
  const [names, types, sqlTypes, ...rows] = json;
  return { columns: names.map((n, i) => ({ name: n, type: types[i], sqlType: sqlTypes[i] })), rows };
}

export async function correctionsView(main, { arg }) {
  main.append(el("h1", {}, "Corrections"));
  let names;
  try {
    names = (await sql("SELECT DISTINCT datasource FROM sys.corrections ORDER BY 1")).rows.map((r) => r[0]);
  } catch (e) {
    main.append(errorBox(e));
    return null;
  }
  if (!names.length) {
    main.append(el("div", { class: "panel" }, el("p", { class: "muted", id: "corrections-empty" },
      "No batch rebuild has replaced real-time segments yet. Each one that does records here, per interval, the real-time answer it replaced and the exact one.")));
    return null;
  }
  const [argDs, argServed] = String(arg || "").split("@");
  const ds = names.includes(argDs) ? argDs : names[0];
  const select = el("select", { id: "corrections-datasource" }, names.map((n) => el("option", { value: n, selected: n === ds }, n)));
  // whose answers: radstack's own real time and batch, or a Druid cluster's (druid: settings)
  let servers = ["radstack"];
  try {
    servers = (await sql(`SELECT DISTINCT served_by FROM sys.corrections WHERE datasource = ${sqlString(ds)} ORDER BY 1 DESC`)).rows.map((r) => r[0]);
  } catch (e) { /* older servers: radstack only */ }
  const servedBy = servers.includes(argServed) ? argServed : servers[0];
  const served = el("select", { id: "corrections-served-by" }, servers.map((n) => el("option", { value: n, selected: n === servedBy }, n === "druid" ? "Druid cluster" : n)));
  const go = () => { location.hash = `#/corrections/${encodeURIComponent(select.value)}${served.value !== "radstack" ? "@" + served.value : ""}`; };
  select.addEventListener("change", go);
  served.addEventListener("change", go);
  const chart = el("div", { class: "chart", id: "corrections-chart" });
  const gapChart = el("div", { class: "chart", id: "corrections-gap-chart" });
  const summary = el("div", { class: "row", id: "corrections-summary" });
  const table = el("div", { class: "scroll" });
  main.append(el("div", { class: "panel" },
    el("div", { class: "row" }, el("label", {}, "Datasource "), select, el("label", {}, " answers of "),
      servers.length > 1 ? served : el("span", { id: "corrections-served-by" }, servedBy === "druid" ? "Druid cluster" : servedBy),
      el("div", { class: "grow" })),
    el("p", { class: "muted", style: "margin:8px 0 0" },
      "Each batch publish that takes an interval over from real time records both answers at the moment of the swap: events real time counted, events the exact rebuild counted, and why they differ.")),
    el("div", { class: "panel" }, summary, chart, el("h3", {}, "The gap, and what the batch layer removed"), gapChart),
    el("div", { class: "panel" }, table));

  let res;
  try {
    // the latest correction of each interval (a later rebuild of a batch version records nothing)
    res = await sql(`SELECT TIME_PARSE("start") AS __time, ${COLUMNS.join(", ")}, "start", "end", version, realtime_version
      FROM sys.corrections WHERE datasource = ${sqlString(ds)} AND served_by = ${sqlString(servedBy)} ORDER BY "start", published`);
  } catch (e) {
    chart.append(errorBox(e));
    return null;
  }
  const idx = Object.fromEntries(res.columns.map((c, i) => [c.name, i]));
  const LABELS = { realtime_events: "real time", batch_events: "exact (batch)", event_gap: "gap",
    duplicates_removed: "duplicates removed", invalid_dropped: "invalid dropped" };
  const plot = (box, names) => renderChart(box, ["__time", ...names].map((n) => ({ ...res.columns[idx[n]], name: LABELS[n] || n })),
    res.rows.map((r) => ["__time", ...names].map((n) => r[idx[n]])));
  plot(chart, ["realtime_events", "batch_events"]);
  plot(gapChart, ["event_gap", "duplicates_removed", "invalid_dropped"]);
  const total = (n) => res.rows.reduce((s, r) => s + (Number(r[idx[n]]) || 0), 0);
  const rt = total("realtime_events"), exact = total("batch_events");
  summary.append(el("b", {}, `${fmtNum(res.rows.length)} interval${res.rows.length === 1 ? "" : "s"} corrected`),
    el("span", {}, `real time ${fmtNum(rt)} events`),
    el("span", {}, `· exact ${fmtNum(exact)} events`),
    el("span", { id: "corrections-gap" }, `· gap ${fmtNum(exact - rt)} (${exact ? ((100 * (exact - rt)) / exact).toFixed(2) : "0.00"} % of exact)`),
    el("span", { class: "muted" }, `${fmtNum(total("late_recovered"))} late recovered, ${fmtNum(total("duplicates_removed"))} duplicates removed, ${fmtNum(total("invalid_dropped"))} invalid dropped`));
  const head = el("tr", {}, ["interval", "real time", "exact", "gap", "late recovered", "duplicates removed", "invalid dropped", "replaced version", "batch version"]
    .map((h, i) => el("th", { class: i > 0 && i < 7 ? "num" : "" }, h)));
  const body = res.rows.map((r) => el("tr", {},
    el("td", {}, `${r[idx.start]}/${r[idx.end]}`),
    ...COLUMNS.map((n) => el("td", { class: "num" }, r[idx[n]] == null ? "–" : fmtNum(r[idx[n]]))),
    el("td", {}, r[idx.realtime_version]), el("td", {}, r[idx.version])));
  table.append(el("table", { class: "grid", id: "corrections-table" }, el("thead", {}, head), el("tbody", {}, body)));
  return null;
}
