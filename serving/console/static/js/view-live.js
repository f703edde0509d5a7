// Live: subscribe to a Druid SQL query and watch its answer change (POST /radstack/v1/subscriptions, then
// its Server-Sent Events stream, read with fetch so the Basic credentials go along).
import { getJSON, postJSON, request } from "./api.js";
import { el, errorBox, fmtNum } from "./util.js";
import { createEditor } from "./sql-editor.js";

const EXAMPLE = "SELECT publisher, SUM(\"count\") AS impressions\nFROM ads\nWHERE __time >= CURRENT_TIMESTAMP - INTERVAL '10' MINUTE\nGROUP BY 1\nORDER BY 2 DESC\nLIMIT 5";

// Yields {event, id, data} for each event of an SSE body.
async function* sseEvents(res) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  let ev = {};
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += decoder.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, "");
      buf = buf.slice(nl + 1);
      if (line === "") {
        if (ev.data !== undefined) yield { event: ev.event || "message", id: ev.id, data: ev.data };
        ev = {};
      } else if (!line.startsWith(":")) {
        const i = line.indexOf(":");
        const key = i < 0 ? line : line.slice(0, i);
        const val = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
        ev[key] = key === "data" && ev.data !== undefined ? `${ev.data}\n${val}` : val;
      }
    }
  }
}

function answerTable(rows) {
  if (!rows.length) return el("p", { class: "muted", id: "live-empty" }, "No rows.");
  const cols = Object.keys(rows[0]);
  const numeric = cols.map((c) => rows.every((r) => r[c] == null || typeof r[c] === "number"));
  return el("table", { class: "grid", id: "live-results" },
    el("thead", {}, el("tr", {}, cols.map((c, i) => el("th", { class: numeric[i] ? "num" : "" }, c)))),
    el("tbody", {}, rows.map((r) => el("tr", {}, cols.map((c, i) => r[c] == null
      ? el("td", { class: "null" }, "null")
      : el("td", { class: numeric[i] ? "num" : "" }, typeof r[c] === "number" ? fmtNum(r[c]) : String(r[c])))))));
}

export async function liveView(main, { arg }) {
  const subscribeBtn = el("button", { id: "subscribe" }, "Subscribe");
  const stopBtn = el("button", { id: "unsubscribe", class: "danger", disabled: true }, "Delete subscription");
  const status = el("span", { class: "info", id: "live-status" });
  const out = el("div", { id: "live-output" });
  const list = el("div", { id: "live-list" });
  const editor = createEditor(EXAMPLE, { onRun: () => subscribe() });
  main.append(el("h1", {}, "Live"),
    el("p", { class: "muted" }, "The answer is pushed again whenever the segments it reads change (real-time growth, handoff, batch publish, compaction) and, for a query on CURRENT_TIMESTAMP, as its window slides."),
    el("div", { class: "panel" }, editor.element,
      el("div", { class: "row querybar" }, subscribeBtn, stopBtn, el("div", { class: "grow" }), status)),
    out, el("div", { class: "panel" }, el("h2", {}, "Subscriptions"), list));

  let current = null; // { id, controller }

  async function refreshList() {
    try {
      const subs = await getJSON("/radstack/v1/subscriptions");
      list.replaceChildren(subs.length ? el("table", { class: "grid", id: "live-subscriptions" },
        el("thead", {}, el("tr", {}, el("th", {}, "id"), el("th", {}, "query"), el("th", {}, "created"), el("th", {}, ""))),
        el("tbody", {}, subs.map((s) => el("tr", { "data-id": s.id },
          el("td", {}, el("code", {}, s.id.slice(0, 8))),
          el("td", {}, el("code", {}, s.query || JSON.stringify(s.nativeQuery))),
          el("td", {}, s.created),
          el("td", {}, el("button", { class: "ghost", onclick: () => { location.hash = `#/live/${s.id}`; } }, "Watch")))))) :
        el("p", { class: "muted" }, "None yet."));
    } catch (e) {
      list.replaceChildren(errorBox(e));
    }
  }

  function stopWatching() {
    if (current) current.controller.abort();
    current = null;
  }

  async function watch(id) {
    stopWatching();
    const controller = new AbortController();
    current = { id, controller };
    stopBtn.disabled = false;
    status.textContent = `subscription ${id.slice(0, 8)}: connecting…`;
    let pushes = 0;
    try {
      const res = await request(`/radstack/v1/subscriptions/${encodeURIComponent(id)}/events`, { signal: controller.signal });
      if (!res.ok) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
      for await (const ev of sseEvents(res)) {
        if (ev.event === "end") { status.textContent = `subscription ${id.slice(0, 8)} ended`; break; }
        const data = JSON.parse(ev.data);
        pushes += 1;
        const when = new Date().toLocaleTimeString();
        if (ev.event === "error") {
          out.replaceChildren(errorBox(new Error(data.errorMessage || JSON.stringify(data))));
        } else {
          out.replaceChildren(el("div", { class: "panel" }, el("h2", {}, "Answer"), el("div", { class: "scroll" }, answerTable(data))));
        }
        status.textContent = `subscription ${id.slice(0, 8)}: answer #${ev.id} at ${when} (${pushes} received)`;
        out.dataset.pushes = String(pushes);
      }
    } catch (e) {
      if (e.name !== "AbortError") out.replaceChildren(errorBox(e));
    }
  }

  async function subscribe() {
    try {
      const sub = await postJSON("/radstack/v1/subscriptions", { query: editor.value });
      await refreshList();
      location.hash = `#/live/${sub.id}`;
    } catch (e) {
      out.replaceChildren(errorBox(e));
    }
  }

  subscribeBtn.addEventListener("click", subscribe);
  stopBtn.addEventListener("click", async () => {
    if (!current) return;
    const id = current.id;
    stopWatching();
    await request(`/radstack/v1/subscriptions/${encodeURIComponent(id)}`, { method: "DELETE" });
    stopBtn.disabled = true;
    out.replaceChildren();
    location.hash = "#/live";
  });
  await refreshList();
  if (arg) {
    const sub = await getJSON(`/radstack/v1/subscriptions/${encodeURIComponent(arg)}`).catch(() => null);
    if (sub && sub.query) editor.value = sub.query;
    watch(arg);
  }
  return stopWatching;
}
