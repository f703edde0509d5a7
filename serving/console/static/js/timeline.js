// The Timeline picture: which segment version serves each interval, and everything it hides.
import { svg, fmtNum, fmtBytes } from "./util.js";

export const KIND_COLORS = { realtime: "#f59e0b", "handed-off": "#a855f7", batch: "#3b82f6", compacted: "#10b981", tombstone: "#9ca3af" };
export const KIND_LABELS = { realtime: "real-time", "handed-off": "handed-off", batch: "batch", compacted: "compacted", tombstone: "tombstone" };
const GROUP_ORDER = ["compacted", "batch", "handed-off", "realtime", "tombstone"];
const STEPS = [60e3, 5 * 60e3, 15 * 60e3, 3600e3, 3 * 3600e3, 6 * 3600e3, 12 * 3600e3, 86400e3, 2 * 86400e3, 7 * 86400e3,
  14 * 86400e3, 30 * 86400e3, 91 * 86400e3, 365 * 86400e3];

function ticks(t0, t1, maxTicks) {
  const step = STEPS.find((s) => (t1 - t0) / s <= maxTicks) || STEPS[STEPS.length - 1];
  const out = [];
  for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) out.push(t);
  return { step, ticks: out };
}

function tickLabel(t, step) {
  const iso = new Date(t).toISOString();
  if (step >= 86400e3) return iso.slice(0, 10);
  if (iso.slice(11, 16) === "00:00") return `${iso.slice(5, 10)} 00:00`;
  return iso.slice(11, 16);
}

function shortVersion(v) {
  return v.length >= 19 ? v.slice(0, 16).replace("T", " ") : v;
}

// Rows for one group: newest versions first, each segment in the first row it does not overlap.
export function pack(segments, maxRows = 48) {
  const sorted = [...segments].sort((a, b) => (a.version < b.version ? 1 : a.version > b.version ? -1 : 0)
    || a._s - b._s || a.partitionNum - b.partitionNum);
  const rows = [];
  for (const s of sorted) {
    let r = rows.findIndex((row) => row.every((o) => o._e <= s._s || o._s >= s._e));
    if (r < 0) {
      if (rows.length < maxRows) { rows.push([]); r = rows.length - 1; } else r = rows.length - 1;
    }
    rows[r].push(s);
  }
  return rows;
}

function defs() {
  const d = svg("defs");
  for (const [kind, color] of Object.entries(KIND_COLORS)) {
    const p = svg("pattern", { id: `hatch-${kind}`, width: 6, height: 6, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" });
    p.append(svg("rect", { width: 6, height: 6, fill: "#fff" }), svg("line", { x1: 0, y1: 0, x2: 0, y2: 6, stroke: color, "stroke-width": 3 }));
    d.append(p);
  }
  const u = svg("pattern", { id: "hatch-unused", width: 6, height: 6, patternUnits: "userSpaceOnUse" });
  u.append(svg("rect", { width: 6, height: 6, fill: "#f1f5f9" }), svg("path", { d: "M0 0L6 6M6 0L0 6", stroke: "#94a3b8", "stroke-width": 0.8 }));
  d.append(u);
  return d;
}

export function renderTimeline(container, view, { onSelect, selected } = {}) {
  container.replaceChildren();
  if (!view.segments.length || !view.start) {
    container.append(Object.assign(document.createElement("p"), { className: "muted", textContent: "No segments in this range." }));
    return;
  }
  const t0 = Date.parse(view.start), t1 = Date.parse(view.end);
  const W = Math.max(860, container.clientWidth || 1100), LG = 150, RG = 14;
  const fx = (t) => LG + ((Math.min(Math.max(t, t0), t1) - t0) / (t1 - t0 || 1)) * (W - LG - RG);
  const ROW = 16, GAP = 3;
  const segs = view.segments.map((s) => ({ ...s, _s: Date.parse(s.start), _e: Date.parse(s.end) }));

  const groups = GROUP_ORDER.map((k) => [k, pack(segs.filter((s) => s.kind === k))]).filter(([, rows]) => rows.length);
  let H = 34 + 30 + 10;
  for (const [, rows] of groups) H += 18 + rows.length * (ROW + GAP) + 8;
  const root = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, class: "timeline-svg", role: "img", "aria-label": `timeline of ${view.dataSource}` });
  root.append(defs());

  // time axis + grid
  const { step, ticks: tk } = ticks(t0, t1, Math.max(4, Math.floor((W - LG) / 95)));
  for (const t of tk) {
    root.append(svg("line", { x1: fx(t), x2: fx(t), y1: 22, y2: H, stroke: "#eef0f3" }));
    root.append(svg("text", { x: fx(t), y: 15, "text-anchor": fx(t) > W - 45 ? "end" : "middle" }, tickLabel(t, step)));
  }

  // what serves each interval
  let y = 34;
  root.append(svg("text", { x: 8, y: y + 18, "font-weight": 700 }, "serving"));
  const served = svg("g", { class: "served" });
  for (const p of view.served) {
    const x = fx(Date.parse(p.start)), w = Math.max(1.5, fx(Date.parse(p.end)) - x);
    const g = svg("g", { class: `served-piece kind-${p.kind}`, "data-kind": p.kind, "data-version": p.version });
    g.append(svg("rect", { x, y, width: w, height: 26, fill: KIND_COLORS[p.kind], rx: 2 },
      svg("title", {}, `${p.start} / ${p.end}\nserved by ${KIND_LABELS[p.kind]} version ${p.version}\n${p.partitions} partition(s)`)));
    if (w > 70) g.append(svg("text", { x: x + 5, y: y + 17, fill: "#fff", "font-weight": 600, "pointer-events": "none" },
      w > 190 ? `${KIND_LABELS[p.kind]} · v ${shortVersion(p.version)}` : KIND_LABELS[p.kind]));
    served.append(g);
  }
  root.append(served);
  y += 30 + 10;

  for (const [kind, rows] of groups) {
    root.append(svg("line", { x1: 0, x2: W, y1: y, y2: y, stroke: "#e5e7eb" }));
    root.append(svg("rect", { x: 8, y: y + 6, width: 10, height: 10, rx: 2, fill: KIND_COLORS[kind] }));
    const n = rows.reduce((a, r) => a + r.length, 0);
    root.append(svg("text", { x: 24, y: y + 15, "font-weight": 600 }, `${KIND_LABELS[kind]} (${n})`));
    y += 18;
    rows.forEach((row, ri) => {
      const ry = y + ri * (ROW + GAP);
      for (const s of row) {
        const x = fx(s._s), w = Math.max(2, fx(s._e) - x);
        const state = !s.used ? "unused" : s.overshadowed ? "overshadowed" : s.visible.length ? "visible" : "hidden";
        const g = svg("g", { class: `seg kind-${kind} ${state}${selected === s.id ? " selected" : ""}`, "data-segment-id": s.id,
          "data-kind": kind, "data-state": state, "data-version": s.version, tabindex: 0 });
        const fill = state === "unused" ? "url(#hatch-unused)" : state === "overshadowed" ? `url(#hatch-${kind})` : KIND_COLORS[kind];
        g.append(svg("rect", { class: "body", x, y: ry, width: w, height: ROW, rx: 2, fill,
          "fill-opacity": state === "visible" || state === "overshadowed" || state === "unused" ? 1 : 0.35,
          stroke: state === "unused" ? "#64748b" : state === "overshadowed" ? KIND_COLORS[kind] : "none",
          "stroke-dasharray": state === "unused" ? "3 2" : null }));
        if (state === "visible") {
          // parts of a visible segment that a newer version hides are drawn faded
          const vis = s.visible.map(([a, b]) => [Date.parse(a), Date.parse(b)]);
          const whole = vis.some(([a, b]) => a <= s._s && b >= s._e);
          if (!whole) {
            g.querySelector("rect.body").setAttribute("fill-opacity", 0.3);
            for (const [a, b] of vis) {
              g.append(svg("rect", { x: fx(a), y: ry, width: Math.max(1.5, fx(b) - fx(a)), height: ROW, fill: KIND_COLORS[kind], "pointer-events": "none" }));
            }
          }
        }
        const label = kind === "realtime" ? `p${s.partitionNum}` : `v ${shortVersion(s.version)}${s.partitionNum ? ` p${s.partitionNum}` : ""}`;
        if (w > label.length * 6.2 + 8) {
          g.append(svg("text", { x: x + 4, y: ry + 12, fill: state === "visible" ? "#fff" : "#1f2937", "pointer-events": "none", "font-size": 10 }, label));
        }
        g.append(svg("title", {}, `${s.id}\n${KIND_LABELS[kind]} · ${state}${s.used ? "" : " (unused)"}\nversion ${s.version}, partition ${s.partitionNum}` +
          `\n${fmtNum(s.numRows)} rows, ${fmtBytes(s.size)}`));
        if (onSelect) {
          g.addEventListener("click", () => onSelect(s));
          g.addEventListener("keydown", (e) => { if (e.key === "Enter") onSelect(s); });
        }
        root.append(g);
      }
    });
    y += rows.length * (ROW + GAP) + 8;
  }
  const now = Date.now();
  if (now > t0 && now < t1) root.append(svg("line", { x1: fx(now), x2: fx(now), y1: 22, y2: H, stroke: "#dc2626", "stroke-dasharray": "4 3" }));
  container.append(root);
}

export function legend() {
  const div = document.createElement("div");
  div.className = "legend";
  const item = (style, text) => {
    const s = document.createElement("span");
    const i = document.createElement("i");
    i.setAttribute("style", style);
    s.append(i, text);
    div.append(s);
  };
  for (const [k, c] of Object.entries(KIND_COLORS)) item(`background:${c}`, KIND_LABELS[k]);
  item("background:repeating-linear-gradient(45deg,#3b82f6 0 3px,#fff 3px 6px);border:1px solid #3b82f6", "overshadowed");
  item("background:#f1f5f9;border:1px dashed #64748b", "unused");
  item("background:#3b82f6;opacity:.35", "hidden part / incomplete set");
  return div;
}
