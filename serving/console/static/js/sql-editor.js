// A small Druid SQL editor: a transparent textarea over a highlighted copy of its text.
const KEYWORDS = new Set(`SELECT FROM WHERE GROUP BY ORDER LIMIT OFFSET AS AND OR NOT IN IS NULL LIKE BETWEEN
HAVING JOIN LEFT RIGHT INNER OUTER FULL CROSS ON UNION ALL DISTINCT CASE WHEN THEN ELSE END ASC DESC WITH
TIME TIMESTAMP INTERVAL EXPLAIN PLAN FOR TRUE FALSE CAST FILTER OVER PARTITION ROWS RANGE PRECEDING FOLLOWING
CURRENT ROW UNNEST EXISTS ANY SOME VALUES DAY HOUR MINUTE SECOND MONTH YEAR WEEK QUARTER ESCAPE
INSERT REPLACE INTO OVERWRITE PARTITIONED CLUSTERED SET`.split(/\s+/));

const TOKEN = /(--[^\n]*|\/\*[\s\S]*?(?:\*\/|$))|('(?:''|[^'])*'?)|("(?:""|[^"])*"?)|(\b\d+(?:\.\d+)?(?:[eE][+-]?\d+)?\b)|([A-Za-z_][A-Za-z0-9_$]*)|([<>=!|+\-*/%,;().]+)/g;

export function tokenize(text) {
  const out = [];
  let last = 0;
  for (const m of text.matchAll(TOKEN)) {
    if (m.index > last) out.push(["", text.slice(last, m.index)]);
    let cls = "";
    if (m[1]) cls = "com";
    else if (m[2]) cls = "str";
    else if (m[3]) cls = "id";
    else if (m[4]) cls = "num";
    else if (m[5]) {
      const after = text.slice(m.index + m[5].length).match(/^\s*\(/);
      cls = KEYWORDS.has(m[5].toUpperCase()) ? "kw" : after ? "fn" : "";
    } else if (m[6]) cls = "op";
    out.push([cls, m[0]]);
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push(["", text.slice(last)]);
  return out;
}

export function createEditor(initial, { onRun } = {}) {
  const root = document.createElement("div");
  root.className = "editor";
  const pre = document.createElement("pre");
  pre.setAttribute("aria-hidden", "true");
  const code = document.createElement("code");
  pre.append(code);
  const ta = document.createElement("textarea");
  ta.spellcheck = false;
  ta.setAttribute("aria-label", "SQL query");
  ta.setAttribute("autocapitalize", "off");
  ta.value = initial || "";
  root.append(pre, ta);

  const render = () => {
    code.replaceChildren();
    for (const [cls, t] of tokenize(ta.value)) {
      if (!cls) { code.append(t); continue; }
      const s = document.createElement("span");
      s.className = `tok-${cls}`;
      s.textContent = t;
      code.append(s);
    }
    code.append("\n"); // keeps the last line's height when the text ends with a newline
    pre.scrollTop = ta.scrollTop;
    pre.scrollLeft = ta.scrollLeft;
  };
  ta.addEventListener("input", render);
  ta.addEventListener("scroll", () => { pre.scrollTop = ta.scrollTop; pre.scrollLeft = ta.scrollLeft; });
  ta.addEventListener("keydown", (e) => {
    if ((e.ctrlKey || e.metaKey) && e.key === "Enter") {
      e.preventDefault();
      if (onRun) onRun();
    } else if (e.key === "Tab" && !e.shiftKey) {
      e.preventDefault();
      const { selectionStart: a, selectionEnd: b } = ta;
      ta.setRangeText("  ", a, b, "end");
      render();
    }
  });
  render();
  return {
    element: root,
    textarea: ta,
    get value() { return ta.value; },
    set value(v) { ta.value = v; render(); },
    focus() { ta.focus(); },
    insert(text) { // at the cursor (replacing a selection), as typing would
      ta.setRangeText(text, ta.selectionStart, ta.selectionEnd, "end");
      render();
      ta.focus();
    },
  };
}
