// Ingestion: the streaming job, the archiver, tasks/backfills with their counters, and a backfill form.
import { getJSON, postJSON, request } from "./api.js";
import { el, errorBox, fmtBytes, fmtDuration, fmtNum, highlightJSON, shortTime, showModal } from "./util.js";

const WARN = /thrown|unparse|dead|error|fail|invalid|lag|undone/i;
const FIRST = ["processed", "processedRowsPerSecond", "inputRowsPerSecond", "thrownAway", "unparseable", "deadLettered",
  "processedWithError", "lag", "batchDurationMs", "lastBatchId", "records", "bytes", "files", "flushes", "invalid_json"];

function cards(value, skip = []) {
  const entries = Object.entries(value || {}).filter(([k, v]) => !skip.includes(k) && (v === null || typeof v !== "object")
    && !(typeof v === "string" && v.length > 32)); // long texts (errors) are shown on their own
  entries.sort((a, b) => {
    const ia = FIRST.indexOf(a[0]), ib = FIRST.indexOf(b[0]);
    return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib);
  });
  return el("div", { class: "cards" }, entries.map(([k, v]) => el("div", { class: `card${WARN.test(k) && typeof v === "number" && v > 0 ? " warn" : ""}`, "data-counter": k },
    el("div", { class: "k", title: k }, label(k)), el("div", { class: "v" }, cardValue(k, v)))));
}

// "processedRowsPerSecond" → "processed rows per second", "invalid_json" → "invalid json" (the raw key is the title)
export function label(key) {
  return key.replace(/_/g, " ").replace(/([a-z0-9])([A-Z])/g, "$1 $2").toLowerCase();
}

// epoch millis read as a time, durations in ms as durations, bytes as bytes, counts with separators
export function cardValue(key, v) {
  if (typeof v !== "number") return String(v);
  if (/bytes/i.test(key)) return fmtBytes(v);
  if (v > 1e12 && v < 1e14) return shortTime(new Date(v).toISOString()); // 2001 … 5138: an instant
  if (/(Ms|_ms|Millis)$/.test(key)) return fmtDuration(v);
  return fmtNum(v);
}

function nested(value) {
  const objs = Object.entries(value || {}).filter(([, v]) => v && typeof v === "object" && Object.keys(v).length);
  return objs.map(([k, v]) => el("details", {}, el("summary", {}, k), highlightJSON(v)));
}

function updated(ms) {
  if (ms == null) return "";
  const t = typeof ms === "number" ? ms : Date.parse(ms);
  return Number.isNaN(t) ? String(ms) : `updated ${fmtDuration(Date.now() - t)} ago`;
}

export async function ingestionView(main, { session }) {
  const live = el("div", { id: "ingestion-live" }, el("p", { class: "muted" }, "Loading…"));
  main.append(el("div", { class: "row" }, el("h1", { class: "grow" }, "Ingestion"), el("span", { class: "muted", id: "ing-updated" })));
  main.append(backfillPanel(session));
  main.append(live);
  const load = async () => {
    const [data, supervisors] = await Promise.all([getJSON("/radstack/v1/ingestion"),
      getJSON("/druid/indexer/v1/supervisor?full").catch(() => [])]);
    live.replaceChildren(supervisorsPanel(supervisors, load), streamingPanel(data.streaming), archiverPanel(data.archiver),
      tasksPanel(data.tasks));
    const u = document.getElementById("ing-updated");
    if (u) u.textContent = `as of ${data.now.slice(11, 19)} UTC · refreshes every 5 s`;
  };
  try { await load(); } catch (e) { live.replaceChildren(errorBox(e)); }
  const timer = setInterval(() => load().catch(() => {}), 5000);
  return () => clearInterval(timer);
}

// Druid Kafka supervisors (POST /druid/indexer/v1/supervisor), each run as a streaming query.
function supervisorsPanel(supervisors, reload) {
  const p = el("div", { class: "panel", id: "supervisors" }, el("h2", {}, "Supervisors"));
  if (!supervisors.length) {
    p.append(el("p", { class: "muted" }, "No Kafka supervisor posted (POST /druid/indexer/v1/supervisor)."));
    return p;
  }
  const act = (id, what) => postJSON(`/druid/indexer/v1/supervisor/${encodeURIComponent(id)}/${what}`, {})
    .then(reload).catch((e) => p.append(errorBox(e)));
  p.append(el("table", { class: "grid" },
    el("thead", {}, el("tr", {}, el("th", {}, "Datasource"), el("th", {}, "Topic"), el("th", {}, "State"),
      el("th", { class: "num" }, "Lag"), el("th", {}, "Committed offsets"), el("th", {}, ""))),
    el("tbody", {}, supervisors.map((s) => {
      const st = s.statusPayload || {};
      return el("tr", { "data-supervisor": s.id }, el("td", {}, s.id), el("td", {}, st.stream || ""), el("td", {}, st.state || ""),
        el("td", { class: "num" }, fmtNum(st.aggregateLag ?? 0)),
        el("td", {}, Object.entries(st.committedOffsets || {}).map(([k, o]) => `p${k}: ${fmtNum(o)}`).join(", ")),
        el("td", {}, el("button", { onclick: () => act(s.id, st.suspended ? "resume" : "suspend") },
          st.suspended ? "Resume" : "Suspend")));
    }))));
  return p;
}

function streamingPanel(jobs) {
  const p = el("div", { class: "panel", id: "streaming" }, el("h2", {}, "Streaming job"));
  if (!jobs.length) p.append(el("p", { class: "muted" }, "No streaming job has reported yet (state key streaming.<datasource>)."));
  for (const j of jobs) {
    const v = j.value || {};
    const err = v.lastError || v.error || (Array.isArray(v.errors) && v.errors.length ? v.errors[v.errors.length - 1] : null);
    p.append(el("h3", {}, j.dataSource, el("span", { class: "muted" }, `  ${v.status || v.state || ""} ${updated(v.updated ?? j.updated)}`)),
      cards(v, ["updated"]), ...nested(v));
    if (err) p.append(el("div", { class: "error-box" }, el("div", { class: "msg" }, typeof err === "string" ? err : JSON.stringify(err))));
  }
  return p;
}

function archiverPanel(archiver) {
  const p = el("div", { class: "panel", id: "archiver" }, el("h2", {}, "Archiver"));
  if (!archiver.stats.length && !archiver.watermarks.length) {
    p.append(el("p", { class: "muted" }, "The archiver has not reported yet (state keys archiver.stats.<group>, archiver.watermark.<topic>)."));
    return p;
  }
  for (const s of archiver.stats) {
    p.append(el("h3", {}, `group ${s.group}`, el("span", { class: "muted" }, `  ${updated(s.value?.updated ?? s.updated)}`)), cards(s.value, ["updated"]), ...nested(s.value));
  }
  if (archiver.watermarks.length) {
    p.append(el("h3", {}, "Completeness watermarks"), el("table", { class: "grid", id: "watermarks" },
      el("thead", {}, el("tr", {}, el("th", {}, "Topic"), el("th", {}, "Watermark"), el("th", { class: "num" }, "Behind now"), el("th", {}, "Partitions"))),
      el("tbody", {}, archiver.watermarks.map((w) => el("tr", {}, el("td", {}, w.topic), el("td", {}, shortTime(w.watermark)),
        el("td", { class: "num" }, fmtDuration(w.behindMs)),
        el("td", {}, Object.entries(w.value?.partitions || {}).map(([k, ms]) => `p${k}: ${shortTime(new Date(ms).toISOString())}`).join(", ")))))));
  }
  return p;
}

function tasksPanel(tasks) {
  const p = el("div", { class: "panel", id: "tasks" }, el("h2", {}, "Tasks and backfills"));
  if (!tasks.length) {
    p.append(el("p", { class: "muted" }, "No tasks yet."));
    return p;
  }
  const cols = ["Task", "Type", "Datasource", "Started by", "Status", "Created", "Duration", "Processed", "Thrown away", "Unparseable", "With errors", "Error"];
  p.append(el("div", { class: "scroll" }, el("table", { class: "grid", id: "task-table" },
    el("thead", {}, el("tr", {}, cols.map((c, i) => el("th", { class: i >= 7 && i <= 10 ? "num" : "" }, c)))),
    el("tbody", {}, tasks.map((t) => el("tr", { class: "clickable", "data-task-id": t.id, onclick: () => openTask(t) },
      el("td", { title: t.id }, t.id.length > 36 ? `${t.id.slice(0, 35)}…` : t.id), el("td", {}, t.type), el("td", {}, t.dataSource),
      el("td", {}, t.startedBy || "task API"),
      el("td", {}, el("span", { class: `status ${t.status}` }, t.status)), el("td", {}, shortTime(t.createdTime)),
      el("td", {}, t.duration == null ? "–" : fmtDuration(t.duration)),
      el("td", { class: "num" }, fmtNum(t.rowStats.processed)), el("td", { class: "num" }, fmtNum(t.rowStats.thrownAway)),
      el("td", { class: "num" }, fmtNum(t.rowStats.unparseable)), el("td", { class: "num" }, fmtNum(t.rowStats.processedWithError)),
      el("td", { title: t.errorMsg || "" }, t.errorMsg ? (t.errorMsg.length > 60 ? `${t.errorMsg.slice(0, 59)}…` : t.errorMsg) : "")))))));
  return p;
}

async function openTask(t) {
  let body;
  try {
    const base = `/druid/indexer/v1/task/${encodeURIComponent(t.id)}`;
    const [status, reports, log] = await Promise.all([
      getJSON(`${base}/status`),
      getJSON(`${base}/reports`).catch((e) => e.body || { error: e.message }),
      // a rebuild's own log (Druid's task-log API); tasks without one answer 404
      request(`${base}/log`).then((r) => (r.ok ? r.text() : null)).catch(() => null)]);
    body = el("div", {}, el("h3", {}, "Status"), highlightJSON(status.status),
      ...(log == null ? [] : [el("h3", {}, "Log"), el("pre", { class: "task-log", id: "task-log" }, log)]),
      el("h3", {}, "Reports"), highlightJSON(reports));
  } catch (e) {
    body = errorBox(e);
  }
  showModal(t.id, body);
}

function backfillPanel(session) {
  const caps = session.capabilities || {};
  if (!caps.backfill) {
    return el("div", { class: "panel muted", id: "backfill-unavailable" },
      "Backfill: not available on this server (the batch layer has not registered its backfill endpoint).");
  }
  const ds = el("input", { type: "text", id: "backfill-datasource", placeholder: "datasource" });
  const iv = el("input", { type: "text", id: "backfill-interval", size: 44, placeholder: "2024-01-01/2024-01-02 or 2024-01-01/P1D" });
  const out = el("div", { id: "backfill-result" });
  const btn = el("button", { id: "backfill-submit" }, "Backfill interval");
  btn.addEventListener("click", async () => {
    btn.disabled = true;
    out.replaceChildren(el("span", { class: "muted" }, "submitting…"));
    try {
      const res = await postJSON(caps.backfillEndpoint, { dataSource: ds.value.trim(), interval: iv.value.trim() });
      out.replaceChildren(highlightJSON(res));
    } catch (e) {
      out.replaceChildren(errorBox(e));
    } finally {
      btn.disabled = false;
    }
  });
  return el("div", { class: "panel admin-only", id: "backfill" }, el("h2", {}, "Backfill"),
    el("div", { class: "row" }, el("label", {}, "Datasource "), ds, el("label", {}, "Interval "), iv, btn), out);
}
