// Datasources: what is served, how much, since when, how fresh.
import { getJSON } from "./api.js";
import { el, fmtNum, fmtBytes, fmtDuration, shortTime } from "./util.js";
import { KIND_LABELS } from "./timeline.js";

export async function datasourcesView(main) {
  const body = el("div", { class: "panel" }, el("p", { class: "muted" }, "Loading…"));
  main.append(el("div", { class: "row" }, el("h1", { class: "grow" }, "Datasources"),
    el("span", { class: "muted", id: "ds-updated" })), body);
  const load = async () => {
    const list = await getJSON("/radstack/v1/datasources");
    document.getElementById("ds-updated") && (document.getElementById("ds-updated").textContent = `updated ${new Date().toISOString().slice(11, 19)} UTC`);
    const druid = await getJSON("/radstack/v1/druid").catch(() => null);
    const druidSide = druid && druid.configured ? [druidPanel(druid)] : [];
    if (!list.length) {
      body.replaceChildren(el("p", { class: "muted" }, "No datasources yet: nothing has been published. Submit a task or start the streaming job."), ...druidSide);
      return;
    }
    const head = el("tr", {}, ["Datasource", "Rows", "Size", "Segments", "Time range", "Served by", "Ingestion rate", "Freshness", ""]
      .map((h, i) => el("th", { class: [1, 2, 3, 6].includes(i) ? "num" : "" }, h)));
    const rows = list.map((d) => el("tr", { "data-datasource": d.name },
      el("td", {}, el("a", { href: `#/timeline/${encodeURIComponent(d.name)}` }, el("b", {}, d.name))),
      el("td", { class: "num" }, fmtNum(d.rows)),
      el("td", { class: "num" }, fmtBytes(d.size)),
      el("td", { class: "num", title: `${d.overshadowed} more used but overshadowed` }, fmtNum(d.segments),
        d.overshadowed ? el("span", { class: "muted" }, ` (+${d.overshadowed} overshadowed)`) : null),
      el("td", {}, `${shortTime(d.minTime)} → ${shortTime(d.maxTime)}`),
      el("td", {}, Object.entries(d.kinds).map(([k, n]) => el("span", { class: `badge ${k}` }, `${KIND_LABELS[k] || k} ${n}`))),
      el("td", { class: "num" }, rate(d)),
      el("td", { title: `last published ${d.lastPublished}` }, `${fmtDuration(d.freshnessMs)} ago`),
      el("td", {}, el("a", { href: `#/query?sql=${encodeURIComponent(sampleQuery(d.name))}` }, "query"), " · ",
        el("a", { href: `#/timeline/${encodeURIComponent(d.name)}` }, "timeline"))));
    body.replaceChildren(el("table", { class: "grid", id: "datasources" }, el("thead", {}, head), el("tbody", {}, rows)), ...druidSide);
  };
  await load();
  const timer = setInterval(() => load().catch(() => {}), 10000);
  return () => clearInterval(timer);
}

function rate(d) {
  const s = d.streaming || {};
  const live = s.processedRowsPerSecond ?? s.inputRowsPerSecond;
  if (typeof live === "number") return `${fmtNum(Math.round(live))} rows/s (stream)`;
  return d.ingestionRate ? `${fmtNum(d.ingestionRate)} rows/s` : "idle";
}

export function sampleQuery(ds) {
  return `SELECT TIME_FLOOR(__time, 'PT1H') AS "hour", COUNT(*) AS "rows"\nFROM "${ds.replace(/"/g, '""')}"\nGROUP BY 1\nORDER BY 1`;
}

// Druid's side of the datasources a Druid cluster serves too (druid: settings): supervisor, lag, load,
// re-indexes still to do, and the last correction measured against Druid's real-time answer.
function druidPanel(view) {
  const head = el("tr", {}, ["Served by Druid", "Supervisor", "Lag", "Loaded", "Re-index", "Last correction (real time → exact)"]
    .map((h, i) => el("th", { class: [2, 3].includes(i) ? "num" : "" }, h)));
  const rows = Object.entries(view.datasources).map(([name, d]) => {
    const sup = d.supervisor || {};
    const last = d.lastReindex || {};
    const fix = d.lastCorrection;
    return el("tr", { "data-druid-datasource": name },
      el("td", {}, el("b", {}, name)),
      el("td", { title: sup.error || "" }, `${sup.detailedState || sup.state || "–"}${sup.suspended ? " (suspended)" : ""}`),
      el("td", { class: "num" }, sup.aggregateLag == null ? "–" : fmtNum(sup.aggregateLag)),
      el("td", { class: "num", title: d.loadError || "" }, d.loadPercent == null ? "–" : `${d.loadPercent.toFixed(0)} %`),
      el("td", { title: last.error || "" }, d.pendingReindex.length ? `${d.pendingReindex.length} pending (${d.pendingReindex[0]} …)`
        : `${last.status || "–"} ${last.interval || ""}`),
      el("td", {}, fix ? `${fmtNum(fix.realtimeEvents)} → ${fmtNum(fix.batchEvents)} (gap ${fmtNum(fix.gap)})` : "–"));
  });
  return el("div", { style: "margin-top:12px" },
    el("p", { class: "muted" }, `Druid cluster ${view.overlord} (re-indexes read ${view.input})`),
    el("table", { class: "grid", id: "druid-datasources" }, el("thead", {}, head), el("tbody", {}, rows)));
}
