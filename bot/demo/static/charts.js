// Slack's `data_visualization` block drawn as SVG: line, area, bar and pie charts,
// per the block's shape (title; chart.series with axis_config, or chart.segments).
// A point whose value is not a finite number is a gap (the run page uses that for NaN).

const SVG = "http://www.w3.org/2000/svg";
const COLORS = ["#1264a3", "#2eb67d", "#ecb22e", "#e01e5a", "#36c5f0", "#7c3085",
  "#e8912d", "#0b4f6c", "#8e9a1f", "#b3256e", "#4a6bd6", "#5c5c5c"];
const W = 480, H = 220;
const PAD = { left: 52, right: 12, top: 12, bottom: 44 };

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

function finite(v) {
  return typeof v === "number" && Number.isFinite(v);
}

function short(v) {
  const a = Math.abs(v);
  if (a >= 1e6 || (a > 0 && a < 1e-3)) return v.toExponential(1);
  if (a >= 1000) return `${Math.round(v / 100) / 10}k`;
  return String(Math.round(v * 1000) / 1000);
}

// Round ticks covering [lo, hi].
function ticks(lo, hi, count = 4) {
  if (lo === hi) { lo -= 1; hi += 1; }
  const raw = (hi - lo) / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw) || raw;
  const out = [];
  for (let t = Math.floor(lo / step) * step; t <= hi + step * 1e-9; t += step) out.push(Math.round(t / step) * step);
  if (out[0] > lo) out.unshift(out[0] - step);
  if (out[out.length - 1] < hi) out.push(out[out.length - 1] + step);
  return out;
}

// The values of each series in category order (a missing point is a gap).
function table(chart) {
  const categories = (chart.axis_config && chart.axis_config.categories) || [];
  const series = (chart.series || []).map((s) => {
    const byLabel = new Map((s.data || []).map((p) => [p.label, p.value]));
    return { name: s.name, values: categories.map((c) => (byLabel.has(c) ? byLabel.get(c) : null)) };
  });
  return { categories, series };
}

function legend(items) {
  const node = document.createElement("div");
  node.className = "bk-chart-legend";
  items.forEach(([label, color, extra]) => {
    const item = document.createElement("span");
    const swatch = document.createElement("i");
    swatch.style.background = color;
    item.append(swatch, `${label}${extra ? ` ${extra}` : ""}`);
    node.append(item);
  });
  return node;
}

function axes(root, { categories, lo, hi, bars, xLabel, yLabel }) {
  const plotW = W - PAD.left - PAD.right, plotH = H - PAD.top - PAD.bottom;
  const y = (v) => PAD.top + plotH - ((v - lo) / (hi - lo)) * plotH;
  const n = categories.length;
  const x = bars
    ? (i) => PAD.left + (plotW * (i + 0.5)) / n
    : (i) => PAD.left + (n === 1 ? plotW / 2 : (plotW * i) / (n - 1));
  for (const t of ticks(lo, hi).filter((t) => t >= lo && t <= hi)) {
    root.append(svg("line", { x1: PAD.left, x2: W - PAD.right, y1: y(t), y2: y(t), class: "grid" }));
    root.append(svg("text", { x: PAD.left - 6, y: y(t) + 4, "text-anchor": "end", class: "tick" }, short(t)));
  }
  const every = Math.max(1, Math.ceil(n / 8));
  categories.forEach((c, i) => {
    if ((i % every === 0 && n - 1 - i >= every / 2) || i === n - 1) {
      root.append(svg("text", { x: x(i), y: H - PAD.bottom + 16, "text-anchor": "middle", class: "tick" }, c));
    }
  });
  if (xLabel) root.append(svg("text", { x: PAD.left + plotW / 2, y: H - 6, "text-anchor": "middle", class: "axis-title" }, xLabel));
  if (yLabel) {
    root.append(svg("text", { x: 12, y: PAD.top + plotH / 2, "text-anchor": "middle", class: "axis-title",
      transform: `rotate(-90 12 ${PAD.top + plotH / 2})` }, yLabel));
  }
  return { x, y, plotW, plotH };
}

function range(series, withZero) {
  const all = series.flatMap((s) => s.values).filter(finite);
  let lo = Math.min(...all), hi = Math.max(...all);
  if (!all.length) { lo = 0; hi = 1; }
  if (withZero) { lo = Math.min(lo, 0); hi = Math.max(hi, 0); }
  if (lo === hi) { lo -= Math.abs(lo) * 0.1 || 1; hi += Math.abs(hi) * 0.1 || 1; }
  const t = ticks(lo, hi);
  return [Math.min(lo, t[0]), Math.max(hi, t[t.length - 1])];
}

// Runs of consecutive finite points: a line never bridges a gap.
function runs(values, x, y) {
  const out = [];
  let current = [];
  values.forEach((v, i) => {
    if (finite(v)) current.push([x(i), y(v)]);
    else if (current.length) { out.push(current); current = []; }
  });
  if (current.length) out.push(current);
  return out;
}

function xy(chart, kind) {
  const { categories, series } = table(chart);
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: `bk-chart-svg bk-chart-${kind}` });
  const [lo, hi] = range(series, kind !== "line");
  const axis = chart.axis_config || {};
  const { x, y } = axes(root, { categories, lo, hi, bars: kind === "bar", xLabel: axis.x_label, yLabel: axis.y_label });
  const base = y(Math.max(lo, Math.min(0, hi)));
  series.forEach((s, k) => {
    const color = COLORS[k % COLORS.length];
    if (kind === "bar") {
      const slot = (W - PAD.left - PAD.right) / Math.max(1, categories.length);
      const width = (slot * 0.8) / Math.max(1, series.length);
      s.values.forEach((v, i) => {
        if (!finite(v)) return;
        const left = x(i) - slot * 0.4 + width * k;
        const bar = svg("rect", { x: left, y: Math.min(y(v), base), width: Math.max(1, width - 1),
          height: Math.max(1, Math.abs(base - y(v))), fill: color, class: "bar" });
        bar.append(svg("title", {}, `${s.name} · ${categories[i]}: ${v}`));
        root.append(bar);
      });
      return;
    }
    for (const run of runs(s.values, x, y)) {
      const line = run.map(([px, py]) => `${px.toFixed(1)},${py.toFixed(1)}`).join(" ");
      if (kind === "area") {
        const first = run[0][0].toFixed(1), last = run[run.length - 1][0].toFixed(1);
        root.append(svg("polygon", { points: `${first},${base} ${line} ${last},${base}`, fill: color,
          "fill-opacity": 0.3, class: "area" }));
      }
      root.append(svg("polyline", { points: line, fill: "none", stroke: color, "stroke-width": 2, class: "line" }));
    }
    s.values.forEach((v, i) => {
      if (!finite(v)) return;
      const dot = svg("circle", { cx: x(i), cy: y(v), r: categories.length > 12 ? 2 : 3, fill: color, class: "point" });
      dot.append(svg("title", {}, `${s.name} · ${categories[i]}: ${v}`));
      root.append(dot);
    });
  });
  return [root, legend(series.map((s, k) => [s.name, COLORS[k % COLORS.length]]))];
}

function pie(chart) {
  const segments = (chart.segments || []).filter((s) => finite(s.value) && s.value > 0);
  const total = segments.reduce((sum, s) => sum + s.value, 0);
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "bk-chart-svg bk-chart-pie" });
  const cx = W / 2, cy = H / 2, r = H / 2 - 12;
  let angle = -Math.PI / 2;
  segments.forEach((s, k) => {
    const color = COLORS[k % COLORS.length];
    const sweep = (s.value / total) * 2 * Math.PI;
    let shape;
    if (segments.length === 1) {
      shape = svg("circle", { cx, cy, r, fill: color, class: "slice" });
    } else {
      const [x1, y1] = [cx + r * Math.cos(angle), cy + r * Math.sin(angle)];
      const [x2, y2] = [cx + r * Math.cos(angle + sweep), cy + r * Math.sin(angle + sweep)];
      const large = sweep > Math.PI ? 1 : 0;
      shape = svg("path", { d: `M${cx},${cy} L${x1.toFixed(2)},${y1.toFixed(2)} A${r},${r} 0 ${large} 1 ${x2.toFixed(2)},${y2.toFixed(2)} Z`,
        fill: color, stroke: "#fff", "stroke-width": 1, class: "slice" });
    }
    shape.append(svg("title", {}, `${s.label}: ${s.value}`));
    root.append(shape);
    angle += sweep;
  });
  const percent = (v) => `${Math.round((v / total) * 1000) / 10}%`;
  return [root, legend(segments.map((s, k) => [s.label, COLORS[k % COLORS.length], percent(s.value)]))];
}

// The block as a figure: title, the chart, its legend. Unknown chart types say so.
export function dataVisualization(block) {
  const figure = document.createElement("figure");
  figure.className = "bk-chart";
  const caption = document.createElement("figcaption");
  caption.textContent = block.title || "";
  figure.append(caption);
  const chart = block.chart || {};
  const kind = chart.type;
  let parts;
  if (kind === "pie") parts = pie(chart);
  else if (kind === "line" || kind === "area" || kind === "bar") parts = xy(chart, kind);
  else {
    figure.append(document.createTextNode(`(a ${kind || "chart"} this page cannot draw)`));
    return figure;
  }
  const [drawing, key] = parts;
  drawing.setAttribute("role", "img");
  drawing.setAttribute("aria-label", block.title || `${kind} chart`);
  figure.append(drawing, key);
  return figure;
}
