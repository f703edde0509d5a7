// Hand-written SVG charts for query results: a time series when the result has a time column,
// bars (top N) when it has a label column and a number, nothing otherwise.
import { svg, fmtNum } from "./util.js";

const PALETTE = ["#2563eb", "#f59e0b", "#10b981", "#ef4444", "#8b5cf6", "#0891b2", "#db2777", "#65a30d"];
const NUMERIC = new Set(["LONG", "FLOAT", "DOUBLE"]);
const TIME_SQL = new Set(["TIMESTAMP", "DATE"]);

function isTime(c) {
  return TIME_SQL.has((c.sqlType || "").toUpperCase()) || c.name === "__time";
}

function toMillis(v) {
  if (typeof v === "number") return v;
  const t = Date.parse(v);
  return Number.isNaN(t) ? null : t;
}

// What to draw for a result: {kind: "timeseries", x, series: [{name, points: [[ms, y]]}]},
// {kind: "bars", bars: [{label, value}], measure}, or {kind: null, reason}.
export function chartSpec(columns, rows) {
  if (!rows.length) return { kind: null, reason: "no rows" };
  const timeIdx = columns.findIndex(isTime);
  const numIdx = columns.map((c, i) => i).filter((i) => i !== timeIdx && NUMERIC.has((columns[i].type || "").toUpperCase())
    && rows.some((r) => typeof r[i] === "number"));
  const labelIdx = columns.map((c, i) => i).filter((i) => i !== timeIdx && !numIdx.includes(i));
  if (!numIdx.length) return { kind: null, reason: "no numeric column to chart" };
  if (timeIdx >= 0) {
    const series = new Map();
    if (labelIdx.length) {
      const li = labelIdx[0], yi = numIdx[0];
      const totals = new Map();
      for (const r of rows) totals.set(String(r[li]), (totals.get(String(r[li])) || 0) + (Number(r[yi]) || 0));
      const top = [...totals.entries()].sort((a, b) => b[1] - a[1]).slice(0, PALETTE.length).map((e) => e[0]);
      for (const name of top) series.set(name, []);
      for (const r of rows) {
        const s = series.get(String(r[li])), t = toMillis(r[timeIdx]);
        if (s && t != null && typeof r[yi] === "number") s.push([t, r[yi]]);
      }
      return finish({ kind: "timeseries", x: columns[timeIdx].name, y: columns[yi].name,
        split: columns[li].name, series });
    }
    for (const yi of numIdx.slice(0, PALETTE.length)) {
      series.set(columns[yi].name, rows.map((r) => [toMillis(r[timeIdx]), r[yi]])
        .filter(([t, y]) => t != null && typeof y === "number"));
    }
    return finish({ kind: "timeseries", x: columns[timeIdx].name, y: null, series });
  }
  if (!labelIdx.length) return { kind: null, reason: "no label or time column" };
  const yi = numIdx[0];
  const bars = rows.slice(0, 25).map((r) => ({ label: labelIdx.map((i) => (r[i] == null ? "null" : String(r[i]))).join(" · "),
    value: typeof r[yi] === "number" ? r[yi] : 0 }));
  return { kind: "bars", measure: columns[yi].name, bars, truncated: rows.length > 25 };
}

function finish(spec) {
  spec.series = [...spec.series.entries()].map(([name, points]) => ({ name, points: points.sort((a, b) => a[0] - b[0]) }))
    .filter((s) => s.points.length);
  return spec.series.length ? spec : { kind: null, reason: "no time points" };
}

function niceStep(span, n) {
  const raw = span / Math.max(1, n);
  const p = 10 ** Math.floor(Math.log10(raw || 1));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

function yScale(lo, hi, top, bottom) {
  if (lo === hi) { hi = lo === 0 ? 1 : lo + Math.abs(lo) * 0.1; lo = Math.min(0, lo); }
  const step = niceStep(hi - lo, 5);
  const min = Math.floor(lo / step) * step, max = Math.ceil(hi / step) * step;
  const f = (v) => bottom - ((v - min) / (max - min || 1)) * (bottom - top);
  const ticks = [];
  for (let v = min; v <= max + step / 2; v += step) ticks.push(v);
  return { f, ticks };
}

const TIME_STEPS = [1e3, 5e3, 15e3, 60e3, 5 * 60e3, 15 * 60e3, 3600e3, 3 * 3600e3, 6 * 3600e3, 12 * 3600e3, 86400e3,
  2 * 86400e3, 7 * 86400e3, 30 * 86400e3, 91 * 86400e3, 365 * 86400e3];

function timeTicks(x0, x1, max) {
  if (x1 === x0) return [x0];
  const step = TIME_STEPS.find((s) => (x1 - x0) / s <= max) || TIME_STEPS[TIME_STEPS.length - 1];
  const out = [];
  for (let t = Math.ceil(x0 / step) * step; t <= x1; t += step) out.push(t);
  return out;
}

function timeLabel(ms, span) {
  const iso = new Date(ms).toISOString();
  if (span >= 20 * 86400e3) return iso.slice(0, 10);
  if (span >= 2 * 86400e3) return `${iso.slice(5, 10)} ${iso.slice(11, 16)}`;
  return iso.slice(11, 16) + (span < 3600e3 ? iso.slice(16, 19) : "");
}

export function renderChart(container, columns, rows) {
  container.replaceChildren();
  const spec = chartSpec(columns, rows);
  container.dataset.kind = spec.kind || "none";
  if (!spec.kind) {
    container.append(Object.assign(document.createElement("div"), { className: "muted", textContent: `No chart: ${spec.reason}.` }));
    return spec;
  }
  const W = Math.max(520, container.clientWidth || 900);
  if (spec.kind === "bars") return drawBars(container, spec, W);
  return drawSeries(container, spec, W);
}

function drawSeries(container, spec, W) {
  const H = 280, L = 64, R = 170, T = 12, B = 34;
  const all = spec.series.flatMap((s) => s.points);
  const x0 = Math.min(...all.map((p) => p[0])), x1 = Math.max(...all.map((p) => p[0]));
  const ys = all.map((p) => p[1]);
  const { f: fy, ticks } = yScale(Math.min(0, ...ys), Math.max(...ys), T, H - B);
  const fx = (t) => (x1 === x0 ? (L + W - R) / 2 : L + ((t - x0) / (x1 - x0)) * (W - R - L));
  const root = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "time series chart" });
  for (const v of ticks) {
    root.append(svg("line", { class: "gridline", x1: L, x2: W - R, y1: fy(v), y2: fy(v) }));
    root.append(svg("text", { x: L - 6, y: fy(v) + 4, "text-anchor": "end" }, fmtNum(v)));
  }
  const g = svg("g", { class: "axis" });
  g.append(svg("line", { x1: L, x2: W - R, y1: H - B, y2: H - B }), svg("line", { x1: L, x2: L, y1: T, y2: H - B }));
  root.append(g);
  for (const t of timeTicks(x0, x1, Math.max(3, Math.floor((W - L - R) / 110)))) {
    root.append(svg("text", { x: fx(t), y: H - B + 16, "text-anchor": "middle" }, timeLabel(t, x1 - x0)));
  }
  root.append(svg("text", { x: (L + W - R) / 2, y: H - 3, "text-anchor": "middle", fill: "#6b7280" }, spec.x));
  spec.series.forEach((s, i) => {
    const color = PALETTE[i % PALETTE.length];
    const pts = s.points.map(([t, y]) => `${fx(t).toFixed(1)},${fy(y).toFixed(1)}`).join(" ");
    const grp = svg("g", { class: "series", "data-series": s.name });
    if (s.points.length > 1) grp.append(svg("polyline", { points: pts, fill: "none", stroke: color, "stroke-width": 2 }));
    if (s.points.length <= 80) {
      for (const [t, y] of s.points) {
        grp.append(svg("circle", { cx: fx(t), cy: fy(y), r: 3, fill: color },
          svg("title", {}, `${s.name}\n${new Date(t).toISOString()}\n${fmtNum(y)}`)));
      }
    }
    root.append(grp);
    const ly = T + 6 + i * 18;
    root.append(svg("rect", { x: W - R + 14, y: ly - 8, width: 12, height: 12, rx: 2, fill: color }));
    root.append(svg("text", { x: W - R + 32, y: ly + 2 }, s.name.length > 20 ? `${s.name.slice(0, 19)}…` : s.name));
  });
  container.append(root);
  return spec;
}

function drawBars(container, spec, W) {
  const rowH = 22, L = 180, R = 90, T = 6;
  const H = T + spec.bars.length * rowH + 8;
  const max = Math.max(0, ...spec.bars.map((b) => b.value));
  const min = Math.min(0, ...spec.bars.map((b) => b.value));
  const fx = (v) => L + ((v - min) / (max - min || 1)) * (W - L - R);
  const root = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "bar chart" });
  spec.bars.forEach((b, i) => {
    const y = T + i * rowH;
    const label = b.label.length > 26 ? `${b.label.slice(0, 25)}…` : b.label;
    root.append(svg("text", { x: L - 8, y: y + 15, "text-anchor": "end" }, label));
    const x = Math.min(fx(0), fx(b.value)), w = Math.abs(fx(b.value) - fx(0));
    root.append(svg("rect", { class: "bar", x, y: y + 3, width: Math.max(1, w), height: rowH - 6, rx: 2, fill: PALETTE[0] },
      svg("title", {}, `${b.label}: ${fmtNum(b.value)}`)));
    root.append(svg("text", { x: x + w + 6, y: y + 15 }, fmtNum(b.value)));
  });
  container.append(root);
  return spec;
}
