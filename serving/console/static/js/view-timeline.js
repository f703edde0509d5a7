// Timeline: for a datasource and a time range, which version serves each interval.
import { getJSON } from "./api.js";
import { el, errorBox, fmtNum, highlightJSON, showModal } from "./util.js";
import { renderTimeline, legend, KIND_LABELS } from "./timeline.js";

export async function timelineView(main, { arg, params }) {
  const names = await getJSON("/druid/coordinator/v1/metadata/datasources?includeUnused");
  if (!names.length) {
    main.append(el("h1", {}, "Timeline"), el("div", { class: "panel" }, el("p", { class: "muted" }, "No datasources yet.")));
    return null;
  }
  const ds = names.includes(arg) ? arg : names[0];
  const select = el("select", { id: "tl-datasource" }, names.map((n) => el("option", { value: n, selected: n === ds }, n)));
  const interval = el("input", { type: "text", id: "tl-interval", size: 52, placeholder: "all time, or e.g. 2024-01-01/2024-01-08", value: params.get("interval") || "" });
  const unused = el("input", { type: "checkbox", id: "tl-unused", checked: params.get("unused") !== "false" });
  const go = () => {
    const q = new URLSearchParams();
    if (interval.value.trim()) q.set("interval", interval.value.trim());
    if (!unused.checked) q.set("unused", "false");
    location.hash = `#/timeline/${encodeURIComponent(select.value)}${q.toString() ? `?${q}` : ""}`;
  };
  select.addEventListener("change", go);
  unused.addEventListener("change", go);
  interval.addEventListener("keydown", (e) => { if (e.key === "Enter") go(); });
  const summary = el("div", { id: "tl-summary", class: "muted" });
  const pic = el("div", { class: "timeline", id: "timeline" });
  main.append(el("h1", {}, "Timeline"),
    el("div", { class: "panel" },
      el("div", { class: "row" }, el("label", {}, "Datasource "), select, el("label", {}, "Interval "), interval,
        el("label", {}, unused, " show unused"), el("button", { onclick: go }, "Show"), el("div", { class: "grow" })),
      el("p", { class: "muted", style: "margin:8px 0 0" },
        "Each interval is served by the newest complete version; older versions under it are overshadowed. Click a segment for its DataSegment JSON.")),
    el("div", { class: "panel" }, summary, legend(), pic));

  const q = new URLSearchParams();
  if (params.get("interval")) q.set("interval", params.get("interval"));
  if (params.get("unused") === "false") q.set("includeUnused", "false");
  let view;
  try {
    view = await getJSON(`/radstack/v1/timeline/${encodeURIComponent(ds)}?${q}`);
  } catch (e) {
    pic.append(errorBox(e));
    return null;
  }
  summary.replaceChildren(describe(view));
  const draw = (selected) => renderTimeline(pic, view, { selected, onSelect: (s) => openSegment(ds, s, draw) });
  draw();
  const onResize = () => draw();
  window.addEventListener("resize", onResize);
  return () => window.removeEventListener("resize", onResize);
}

function describe(view) {
  const byKind = {};
  for (const p of view.served) byKind[p.kind] = (byKind[p.kind] || 0) + 1;
  const c = view.counts;
  const parts = Object.entries(byKind).map(([k, n]) => el("span", { class: `badge ${k}` }, `${KIND_LABELS[k]} serves ${n} interval${n > 1 ? "s" : ""}`));
  return el("div", { class: "row" }, el("b", {}, view.interval || ""), ...parts,
    el("span", {}, `${fmtNum(c.total)} segments: ${fmtNum(c.visible)} serving, ${fmtNum(c.overshadowed)} overshadowed, ${fmtNum(c.unused)} unused`));
}

async function openSegment(ds, seg, redraw) {
  redraw(seg.id);
  let body;
  try {
    const json = await getJSON(`/druid/coordinator/v1/metadata/datasources/${encodeURIComponent(ds)}/segments/${encodeURIComponent(seg.id)}?includeUnused=true`);
    const state = !seg.used ? "unused" : seg.overshadowed ? "overshadowed" : seg.visible.length ? "serving" : "not visible (incomplete set)";
    body = el("div", { id: "segment-detail" },
      el("div", { class: "row", style: "margin-bottom:10px" }, el("span", { class: `badge ${seg.kind}` }, KIND_LABELS[seg.kind]),
        el("b", {}, state), seg.visible.length ? el("span", { class: "muted" }, `visible: ${seg.visible.map((v) => v.join("/")).join(", ")}`) : null),
      highlightJSON(json));
  } catch (e) {
    body = errorBox(e);
  }
  showModal(seg.id, body);
}
