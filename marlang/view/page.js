"use strict";
// marlang view: everything below reads DATA (embedded by marlang/view/page.py); no network.
const DATA = JSON.parse(document.getElementById("marlang-data").textContent);
const RUNS = DATA.runs;
const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
  "#bcbd22", "#17becf"];
const MARKERS = ["circle", "square", "triangle", "diamond", "cross", "down", "star", "plus"];

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") node.textContent = v; else node.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}
function svgEl(tag, attrs) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  return node;
}
// how an undefined value is written: marlang.statistics.intervals.UNDEFINED, as in marlang's tables
const UNDEFINED = "-";
function num(x, digits) {
  if (x === null || x === undefined || Number.isNaN(x)) return UNDEFINED;
  if (typeof x !== "number") return String(x);
  return x.toFixed(digits === undefined ? 2 : digits);
}
function pm(stat, digits) {
  // the interval the statistic carries (inside its quantity's range), or why it has none
  if (!stat || stat.mean === null || stat.mean === undefined) return UNDEFINED;
  if (stat.low !== null && stat.low !== undefined && stat.high !== null && stat.high !== undefined)
    return `${num(stat.mean, digits)} [${num(stat.low, digits)}, ${num(stat.high, digits)}]`;
  return stat.interval ? `${num(stat.mean, digits)} (${stat.interval})` : num(stat.mean, digits);
}
function bandOf(row, x) {
  // a row's return interval; none where it has none (too few episodes): no band, not a made-up one
  const ok = v => v !== null && v !== undefined;
  return [x, ok(row.return_low) ? row.return_low : null, ok(row.return_high) ? row.return_high : null];
}
function rate(stat) {
  if (!stat || stat.mean === null || stat.mean === undefined) return UNDEFINED;
  return `${num(stat.mean)} [${num(stat.low)}, ${num(stat.high)}]`;
}
function text(value) { return el("div", {class: "text"}, value === null || value === undefined ? "" : String(value)); }

// ---------------------------------------------------------------------------------------- table
// A run's cost per training episode (every model call of the run, summary.json's cost), or null.
function costPerEpisode(cost, key) {
  const values = cost && cost.per_episode ? cost.per_episode[key] : null;
  return values && values.length ? values.reduce((a, b) => a + b, 0) / values.length : null;
}
// calls and tokens per episode as the cost counts them (every model call), as marlang's table does
function callsPerEpisode(s, key, digits) {
  const own = costPerEpisode(s.cost, key);
  return own === null ? pm(s[`${key}_per_episode`], digits) : num(own, digits);
}
// a row whose every call was a cache hit spent no model time: not measured, not 0 (marlang.tables.cost.CACHED)
const CACHED = "cached, not measured";
function allCached(cost) { return !!(cost && cost.llm_calls && !cost.sampled && cost.cached_calls >= cost.llm_calls); }
function renderTable() {
  const body = document.getElementById("table-body");
  const head = ["setting", "environment", "learner", "episodes", "success rate [95% CI]", "return (mean ± 95% CI)",
    "steps", "invalid actions", "LLM calls / episode", "tokens / episode", "model s / episode", "USD / episode"];
  const rows = RUNS.map((r, i) => {
    const s = r.summary || {};
    const success = s.success_defined === false ? UNDEFINED : rate(s.success_rate);
    return el("tr", {},
      el("td", {}, markerIcon(i), " ", r.name, r.finished ? "" : el("span", {class: "muted"}, " (in progress)"),
        r.team ? el("div", {class: "muted"}, Object.entries(r.team).map(([a, p]) => `${a}: ${p}`).join(", ")) : ""),
      el("td", {}, r.env_id || UNDEFINED), el("td", {}, r.learner || UNDEFINED),
      el("td", {class: "num"}, s.episodes === undefined ? r.episodes_total : s.episodes),
      el("td", {class: "num"}, success), el("td", {class: "num"}, pm(s.return)),
      el("td", {class: "num"}, pm(s.steps, 1)),
      el("td", {class: "num"}, s.invalid_action_rate ? num(s.invalid_action_rate.mean, 3) : UNDEFINED),
      el("td", {class: "num"}, r.neural ? UNDEFINED : callsPerEpisode(s, "llm_calls", 1)),
      el("td", {class: "num"}, r.neural ? UNDEFINED : callsPerEpisode(s, "tokens", 0)),
      el("td", {class: "num"}, allCached(s.cost) ? CACHED : num(costPerEpisode(s.cost, "model_seconds"), 2)),
      el("td", {class: "num"}, s.cost && s.cost.priced === "part" ? "partly priced"
        : num(costPerEpisode(s.cost, "usd"), 6)));
  });
  body.append(el("table", {}, el("thead", {}, el("tr", {}, head.map(h => el("th", {}, h)))), el("tbody", {}, rows)));
  body.append(el("p", {class: "muted"}, "Success rates with Wilson intervals; returns with 95% confidence " +
    "intervals; neural runs report their final greedy evaluation. LLM calls, tokens, model seconds and USD per " +
    "episode count every model call of the run (learner roles, checks and held-out evaluation too) per training " +
    "episode."));
  for (const t of DATA.tables) {
    if (t.crossplay) body.append(crossplayMap(t.crossplay, t.path));
    body.append(el("details", {}, el("summary", {}, `table.md of ${t.path}`), el("pre", {}, t.markdown)));
  }
  for (const r of RUNS) if (r.credit_check) body.append(creditCheckTable(r.credit_check, r.name));
}

// marlang credit-check: each critic against the counterfactual oracle, with chance levels.
function creditCheckTable(x, name) {
  const o = x.oracle || {}, c = x.counts || {}, cost = o.cost || {};
  // a user's graph: whole runs of it forked per prompt, graded per episode
  const spent = cost.graph_runs !== undefined ? `${cost.graph_runs} graph runs (${cost.model_calls} model calls)`
    : `${cost.env_steps} env steps`;
  const head = ["critic", "model", "unit", "Spearman", "top-agent agreement", "chance", "graded", "oracle ties",
    "malformed", "calls", "seconds"];
  const rows = (x.critics || []).map(r => el("tr", {},
    el("td", {}, r.critic), el("td", {}, r.model || UNDEFINED), el("td", {}, r.unit),
    el("td", {class: "num"}, pm(r.spearman, 2)), el("td", {class: "num"}, pm(r.top_agent, 2)),
    el("td", {class: "num"}, num(r.top_agent_chance, 2)), el("td", {class: "num"}, r.graded),
    el("td", {class: "num"}, r.oracle_ties), el("td", {class: "num"}, `${r.malformed}/${r.asked}`),
    el("td", {class: "num"}, (r.cost || {}).calls), el("td", {class: "num"}, (r.cost || {}).seconds)));
  return el("div", {}, el("h3", {}, `Credit oracle of ${name} (${x.env_id})`),
    el("table", {}, el("thead", {}, el("tr", {}, head.map(h => el("th", {}, h)))), el("tbody", {}, rows)),
    el("p", {class: "muted"}, `${c.episodes} episodes, ${c.steps} steps, ${c.levels} distinct levels; ` +
      `graded against the oracle's ${o.graded_against} credit, rollout ${o.rollout}, alternatives ` +
      `${o.alternatives}; chance: 0 for the correlation, the column for top-agent agreement; steps where ` +
      `the oracle credits every agent alike are left out (oracle ties). Oracle cost: ${spent}, ` +
      `${cost.seconds} s.`));
}

// A cross-play matrix as a heat map: the player in the first slot by row, its partner by column.
function crossplayMap(x, path) {
  const key = "return";  // the measure the gap is computed on, as crossplay.png shows
  const names = (x.players || []).map(p => p.name);
  const means = names.flatMap(i => names.map(j => ((x[key][i] || {})[j] || {}).mean)).filter(v => v !== null && v !== undefined);
  const lo = Math.min(...means), hi = Math.max(...means);
  const shade = v => {
    if (v === null || v === undefined) return "";
    // returns between the matrix's extremes, and a matrix whose cells are all equal in one
    // neutral shade (equal is not best)
    const t = hi > lo ? (v - lo) / (hi - lo) : 0.5;
    return `background: hsl(${Math.round(10 + 110 * t)}, 60%, ${Math.round(88 - 28 * t)}%)`;
  };
  const slots = x.slots || ["slot 0", "slot 1"];
  const head = el("tr", {}, el("th", {}, `${slots[0]} \\ ${slots.length === 2 ? slots[1] : "partners"}`),
    names.map(n => el("th", {}, n)));
  const rows = names.map(i => el("tr", {}, el("th", {}, i), names.map(j => {
    const s = (x[key][i] || {})[j];
    const cell = s && s.mean !== null && s.mean !== undefined ? num(s.mean, 3) : UNDEFINED;
    return el("td", {class: "num", style: shade(s && s.mean), title: s ? pm(s) : ""}, cell);
  })));
  const g = x.gap || {};
  return el("div", {}, el("h3", {}, `Cross-play (${key.replace("_", " ")}) of ${path}`),
    el("table", {}, el("thead", {}, head), el("tbody", {}, rows)),
    el("p", {class: "muted"}, `Self-play on the diagonal; ${x.levels} held-out levels per cell. Cross-play ` +
      `gap (self-play minus cross-play return, paired by level` +
      ((x.gap_leaves_out || []).length ? `; ${x.gap_leaves_out.join(", ")} left out, a fixed partner` : "") +
      `): ${pm(g)}`));
}

// --------------------------------------------------------------------------------------- charts
function markerPath(kind, x, y, r) {
  switch (kind) {
    case "square": return `M${x - r},${y - r}h${2 * r}v${2 * r}h${-2 * r}z`;
    case "triangle": return `M${x},${y - r * 1.2}L${x + r * 1.1},${y + r * 0.8}L${x - r * 1.1},${y + r * 0.8}z`;
    case "down": return `M${x},${y + r * 1.2}L${x + r * 1.1},${y - r * 0.8}L${x - r * 1.1},${y - r * 0.8}z`;
    case "diamond": return `M${x},${y - r * 1.3}L${x + r * 1.1},${y}L${x},${y + r * 1.3}L${x - r * 1.1},${y}z`;
    case "cross": return `M${x - r},${y - r}L${x + r},${y + r}M${x - r},${y + r}L${x + r},${y - r}`;
    case "plus": return `M${x - r * 1.2},${y}H${x + r * 1.2}M${x},${y - r * 1.2}V${y + r * 1.2}`;
    case "star": {
      let d = "";
      for (let k = 0; k < 10; k++) {
        const a = Math.PI / 5 * k - Math.PI / 2, rr = k % 2 ? r * 0.5 : r * 1.3;
        d += `${k ? "L" : "M"}${x + rr * Math.cos(a)},${y + rr * Math.sin(a)}`;
      }
      return d + "z";
    }
    default: return `M${x - r},${y}a${r},${r} 0 1,0 ${2 * r},0a${r},${r} 0 1,0 ${-2 * r},0`;
  }
}
function drawMarker(svg, kind, x, y, color, hollow) {
  const open = hollow || kind === "cross" || kind === "plus";
  svg.append(svgEl("path", {d: markerPath(kind, x, y, 4), stroke: color, "stroke-width": 1.5,
    fill: open ? "white" : color}));
}
function markerIcon(i, hollow) {
  const svg = svgEl("svg", {width: 14, height: 12});
  drawMarker(svg, MARKERS[i % MARKERS.length], 7, 6, COLORS[i % COLORS.length], hollow);
  return svg;
}
function niceTicks(lo, hi, count, integer) {
  const span = hi - lo;
  let step = Math.pow(10, Math.floor(Math.log10(span / count)));
  for (const m of [1, 2, 5, 10]) { if (span / (step * m) <= count) { step *= m; break; } }
  if (integer) step = Math.max(1, Math.round(step));
  const ticks = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) ticks.push(+v.toFixed(10));
  return ticks;
}
function fmtTick(v) {
  const a = Math.abs(v);
  if (a >= 1e6) return `${+(v / 1e6).toFixed(2)}M`;
  if (a >= 1e4) return `${+(v / 1e3).toFixed(1)}k`;
  if (a > 0 && a < 0.01) return v.toExponential(1);  // a price per episode
  return String(+v.toFixed(3));
}
// Settings on the same points are spread sideways by a small share of the smallest x gap.
function dodge(series) {
  if (series.length < 2) return series;
  const all = [...new Set(series.flatMap(s => s.points.concat(s.evals || []).map(p => p[0])))].sort((a, b) => a - b);
  const gaps = all.slice(1).map((x, k) => x - all[k]).filter(g => g > 0);
  const step = 0.12 * (gaps.length ? Math.min(...gaps) : 1) / (series.length - 1);
  return series.map((s, k) => {
    const d = (k - (series.length - 1) / 2) * step;
    return Object.assign({}, s, {points: s.points.map(p => [p[0] + d, p[1]]),
      band: (s.band || []).map(b => [b[0] + d, b[1], b[2]]), evals: (s.evals || []).map(p => [p[0] + d, p[1]])});
  });
}
// series: [{name, index, points: [[x, y]], band: [[x, lo, hi]], evals: [[x, y]]}]
function chart(title, xlabel, ylabel, series, opts) {
  const W = 520, H = 300, L = 56, R = 14, T = 24, B = 42;
  // The axis spans the undodged x values too, so a tick at the last iteration is never cut off.
  const xs = series.flatMap(s => s.points.concat(s.evals || []).filter(p => p[1] !== null).map(p => p[0])), ys = [];
  xs.push(...(opts.xextra || []));
  series = opts.continuous ? series : dodge(series);  // a scatter's x is a measured cost: never shifted
  for (const s of series) {
    for (const [x, y] of s.points.concat(s.evals || [])) { if (y !== null) { xs.push(x); ys.push(y); } }
    for (const [x, lo, hi] of s.band || []) { xs.push(x); ys.push(lo, hi); }
  }
  const box = el("div", {class: "chart"});
  if (!xs.length) return null;
  let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  let [y0, y1] = opts.ylim || [Math.min(...ys), Math.max(...ys)];
  // A single iteration gets a real axis around it, not a sliver around zero.
  if (opts.continuous && x1 - x0 < 1e-12) { const mid = x0, half = Math.abs(mid) * 0.5 || 1; x0 = mid - half; x1 = mid + half; }
  else if (!opts.continuous && x1 - x0 < 1) { const mid = (x0 + x1) / 2, half = Math.max(0.5, Math.abs(mid) * 0.5); x0 = mid - half; x1 = mid + half; }
  else { const pad = (x1 - x0) * 0.04; x0 -= pad; x1 += pad; }
  if (y1 - y0 < 1e-9) { y0 -= 0.5; y1 += 0.5; } else if (!opts.ylim) { const pad = (y1 - y0) * 0.06; y0 -= pad; y1 += pad; }
  const sx = x => L + (x - x0) / (x1 - x0) * (W - L - R), sy = y => H - B - (y - y0) / (y1 - y0) * (H - T - B);
  const svg = svgEl("svg", {width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": title});
  const t = svgEl("text", {x: W / 2, y: 15, "text-anchor": "middle", "font-weight": "600"}); t.textContent = title; svg.append(t);
  for (const v of niceTicks(x0, x1, 7, opts.integer)) {
    if (v < x0 || v > x1) continue;
    svg.append(svgEl("line", {x1: sx(v), x2: sx(v), y1: T, y2: H - B, stroke: "#eee"}));
    const lab = svgEl("text", {x: sx(v), y: H - B + 14, "text-anchor": "middle", class: "xtick"}); lab.textContent = fmtTick(v); svg.append(lab);
  }
  for (const v of niceTicks(y0, y1, 6, false)) {
    if (v < y0 || v > y1) continue;
    svg.append(svgEl("line", {x1: L, x2: W - R, y1: sy(v), y2: sy(v), stroke: "#eee"}));
    const lab = svgEl("text", {x: L - 5, y: sy(v) + 4, "text-anchor": "end"}); lab.textContent = fmtTick(v); svg.append(lab);
  }
  svg.append(svgEl("rect", {x: L, y: T, width: W - L - R, height: H - T - B, fill: "none", stroke: "#999"}));
  const xl = svgEl("text", {x: (L + W - R) / 2, y: H - 8, "text-anchor": "middle"}); xl.textContent = xlabel; svg.append(xl);
  const yl = svgEl("text", {x: 12, y: (T + H - B) / 2, "text-anchor": "middle", transform: `rotate(-90 12 ${(T + H - B) / 2})`});
  yl.textContent = ylabel; svg.append(yl);
  for (const s of series) {
    const color = COLORS[s.index % COLORS.length], kind = MARKERS[s.index % MARKERS.length];
    const band = (s.band || []).filter(b => b[1] !== null && b[2] !== null);
    if (band.length > 1) {
      const d = band.map((b, k) => `${k ? "L" : "M"}${sx(b[0])},${sy(b[2])}`).join("") +
        band.slice().reverse().map(b => `L${sx(b[0])},${sy(b[1])}`).join("") + "z";
      svg.append(svgEl("path", {d, fill: color, "fill-opacity": 0.12, stroke: "none"}));
    } else if (band.length === 1) {  // one point: its interval as a whisker
      const [bx, lo, hi] = band[0];
      svg.append(svgEl("path", {d: `M${sx(bx)},${sy(lo)}V${sy(hi)}M${sx(bx) - 3},${sy(lo)}h6M${sx(bx) - 3},${sy(hi)}h6`,
        stroke: color, "stroke-width": 1, fill: "none", "stroke-opacity": 0.7}));
    }
    const pts = s.points.filter(p => p[1] !== null);
    if (pts.length > 1) {
      svg.append(svgEl("path", {d: pts.map((p, k) => `${k ? "L" : "M"}${sx(p[0])},${sy(p[1])}`).join(""),
        fill: "none", stroke: color, "stroke-width": 1.6}));
    }
    for (const p of pts) drawMarker(svg, kind, sx(p[0]), sy(p[1]), color, false);
    const ev = (s.evals || []).filter(p => p[1] !== null);
    if (ev.length > 1) {
      svg.append(svgEl("path", {d: ev.map((p, k) => `${k ? "L" : "M"}${sx(p[0])},${sy(p[1])}`).join(""),
        fill: "none", stroke: color, "stroke-width": 1.2, "stroke-dasharray": "4 3"}));
    }
    for (const p of ev) drawMarker(svg, kind, sx(p[0]), sy(p[1]), color, true);
  }
  if (opts.after) opts.after(svg, sx, sy);
  box.append(svg);
  const legend = el("div", {class: "legend"});
  for (const s of series) legend.append(el("span", {}, markerIcon(s.index), " ", s.name));
  if (series.some(s => (s.evals || []).length)) {
    legend.append(el("span", {class: "muted"}, markerIcon(7, true), " hollow: greedy evaluation"));
  }
  box.append(legend);
  return box;
}
function renderCurves() {
  const body = document.getElementById("curves-body");
  const llm = [], llmSuccess = [], neural = [];
  RUNS.forEach((r, index) => {
    const rows = r.iterations || [];
    if (!rows.length && !r.evaluation) return;
    if (r.neural) {
      const evals = rows.filter(x => x.eval_return !== null && x.eval_return !== undefined).map(x => [x.frames, x.eval_return]);
      const ret = (r.summary || {}).return;
      const final = r.evaluation && r.evaluation.frames !== null && ret && ret.mean !== null && ret.mean !== undefined
        ? [r.evaluation.frames, ret.mean] : null;
      if (final && !evals.some(p => p[0] === final[0])) evals.push(final);
      neural.push({name: r.name, index, points: rows.map(x => [x.frames, x.return_mean]),
        band: rows.map(x => bandOf(x, x.frames)), evals});
    } else {
      llm.push({name: r.name, index, points: rows.map(x => [x.iteration, x.return_mean]),
        band: rows.map(x => bandOf(x, x.iteration)),
        evals: rows.filter(x => x.eval_return !== null && x.eval_return !== undefined).map(x => [x.iteration, x.eval_return])});
      llmSuccess.push({name: r.name, index, points: rows.map(x => [x.iteration, x.success_rate])});
    }
  });
  const charts = el("div", {class: "charts"});
  if (llm.length) {
    charts.append(chart("Team return per episode", "iteration", "return (mean, 95% CI)", llm, {integer: true}));
    charts.append(chart("Success rate", "iteration", "success rate", llmSuccess, {integer: true, ylim: [-0.05, 1.05]}));
  }
  if (neural.length) {
    charts.append(chart("Neural learners: training return", "frames", "return per episode", neural, {integer: true}));
  }
  if (!charts.children.length) charts.append(el("p", {class: "muted"}, "No iterations recorded yet."));
  body.append(charts);
}

// ------------------------------------------------------------------------------ score vs cost
// One point per setting (its seeds pooled), whiskers for its intervals, the Pareto front dashed.
function renderFronts() {
  const body = document.getElementById("cost-body");
  const fronts = DATA.fronts || [];
  if (!fronts.length) { body.append(el("p", {class: "muted"}, "No comparison with a cost here.")); return; }
  const ok = v => v !== null && v !== undefined;
  const charts = el("div", {class: "charts"});
  for (const f of fronts) {
    const names = Object.keys(f.points);
    const series = names.map((name, index) => {
      const p = f.points[name];
      return {name: f.frontier.includes(name) ? `${name} (front)` : name, index, points: [[p.cost, p.score]],
        band: ok(p.score_low) && ok(p.score_high) ? [[p.cost, p.score_low, p.score_high]] : []};
    });
    const after = (svg, sx, sy) => {
      for (const name of names) {
        const p = f.points[name];
        if (!ok(p.cost_low) || !ok(p.cost_high)) continue;
        svg.append(svgEl("path", {d: `M${sx(p.cost_low)},${sy(p.score)}H${sx(p.cost_high)}`,
          stroke: COLORS[names.indexOf(name) % COLORS.length], "stroke-opacity": 0.7, fill: "none"}));
      }
      const front = f.frontier.map(n => f.points[n]);
      if (front.length > 1) {
        const d = front.map((p, k) => k ? `H${sx(p.cost)}V${sy(p.score)}` : `M${sx(p.cost)},${sy(p.score)}`).join("");
        svg.append(svgEl("path", {d, stroke: "black", "stroke-dasharray": "5 3", fill: "none"}));
      }
    };
    const xextra = names.flatMap(n => [f.points[n].cost_low, f.points[n].cost_high]).filter(ok);
    const box = chart(`${f.group}: score against cost`, f.cost, f.score, series, {after, xextra, continuous: true});
    if (box) {
      box.append(el("p", {class: "muted"}, `Pareto front (no other setting scores higher at a lower cost): ` +
        f.frontier.join(", ")));
      charts.append(box);
    }
  }
  body.append(charts);
}

// ------------------------------------------------------------------------------------- episodes
const pickRun = document.getElementById("pick-run");
const pickIteration = document.getElementById("pick-iteration");
const pickEpisode = document.getElementById("pick-episode");

function fillSelect(select, options) {
  select.replaceChildren(...options.map(([value, label]) => el("option", {value}, label)));
}
function episodeRuns() { return RUNS.map((r, i) => [i, r]).filter(([, r]) => r.episodes.length); }
function onRun() {
  const run = RUNS[+pickRun.value];
  const iterations = [...new Set(run.episodes.map(e => e.iteration))].sort((a, b) => a - b);
  fillSelect(pickIteration, iterations.map(i => [i, String(i)]));
  onIteration();
}
function onIteration() {
  const run = RUNS[+pickRun.value];
  const options = [];
  run.episodes.forEach((e, k) => {
    if (String(e.iteration) !== pickIteration.value) return;
    const outcome = e.success === true ? "solved" : e.success === false ? "not solved" : "";
    options.push([k, `${e.episode} (${e.phase}, return ${num(e.return)}${outcome ? ", " + outcome : ""})`]);
  });
  fillSelect(pickEpisode, options);
  renderEpisode();
}
function renderEpisode() {
  const view = document.getElementById("episode-view");
  const run = RUNS[+pickRun.value];
  const e = run && run.episodes[+pickEpisode.value];
  if (!e) { view.replaceChildren(el("p", {class: "muted"}, "No episode.")); return; }
  const versions = Object.entries(e.policy_versions || {}).map(([a, v]) => `${a} v${v}`).join(", ");
  const parts = [el("div", {class: "episode-head"},
    el("div", {}, el("b", {}, `Episode ${e.episode}`), ` · ${run.name} · iteration ${e.iteration} · phase ${e.phase}` +
      ` · seed ${e.seed}`),
    el("div", {}, e.success === true ? el("span", {class: "ok"}, "solved") : e.success === false
      ? el("span", {class: "bad"}, "not solved") : "", ` · return ${num(e.return)} · ${e.n_steps} steps` +
      (versions ? ` · policies ${versions}` : "")),
    e.mission ? el("div", {}, "Mission: ", el("i", {}, e.mission)) : null,
    e.error ? el("div", {class: "bad"}, "Failed: ", e.error) : null)];
  const credit = Object.entries(e.credit || {});
  if (credit.length) {
    parts.push(el("div", {class: "credit"}, el("b", {}, "Critic's credit"),
      ...credit.map(([a, c]) => el("div", {}, el("span", {class: "sender"}, a + ": "), c))));
  }
  if (run.episodes_total > run.episodes.length) {
    parts.push(el("p", {class: "muted"}, `${run.episodes.length} of ${run.episodes_total} episodes are in this page ` +
      "(marlang view --max-episodes)."));
  }
  for (const s of e.steps) parts.push(renderStep(s, e.agents));
  const finals = Object.entries(e.final_observations || {});
  if (finals.length) {
    parts.push(el("details", {class: "card"}, el("summary", {}, "Final observations"),
      ...finals.map(([a, o]) => el("div", {}, el("span", {class: "sender"}, a), text(o)))));
  }
  view.replaceChildren(...parts);
}
function renderStep(s, agents) {
  const box = el("div", {class: "step", "data-step": s.t});
  const end = s.terminated ? " · terminated" : s.truncated ? " · truncated" : "";
  const node = s.node ? ` · node ${s.node}${s.call_error ? " · call failed: " + s.call_error : ""}` : "";
  box.append(el("div", {class: "step-title"}, `Step ${s.t}${node}${end}`));
  if (s.messages.length) {
    box.append(el("div", {class: "messages"}, el("b", {}, "Messages"),
      ...s.messages.map(m => el("div", {class: "message"}, el("span", {class: "sender"}, `${m.sender}`),
        m.round !== null && m.round !== undefined ? el("span", {class: "muted"}, ` (round ${m.round})`) : "", ": ", m.content))));
  }
  for (const [agent, v] of Object.entries(s.verdicts || {})) {
    const bits = [];
    if (v.status !== undefined) bits.push(`sandbox: ${v.status}`);
    if (v.passed !== undefined) bits.push(`${v.passed}/${v.total} tests passed`);
    if (v.score !== undefined) bits.push(`score ${num(v.score)}`);
    if (v.solved !== undefined) bits.push(v.solved ? "solved" : "not solved");
    const report = v.report && (v.report.error_type || v.report.message)
      ? el("div", {class: "text"}, [v.report.error_type, v.report.message].filter(Boolean).join(": ")) : null;
    box.append(el("div", {class: "verdict"}, el("b", {}, `Verdict (${agent}): `), bits.join(" · "), report));
  }
  const head = el("tr", {}, ["agent", "observation", "thought", "action", "reward"].map(h => el("th", {}, h)));
  // the episode's agents first, then whoever else acted at this step (a graph's node without a marked prompt)
  const shown = [...new Set([...(agents || []), ...Object.keys(s.decisions)])];
  const rows = shown.filter(a => a in s.observations || a in s.decisions).map(a => {
    const d = s.decisions[a] || {};
    const flags = [d.valid === false ? "invalid" : "", d.reprompted ? "re-prompted" : "", d.fallback ? "fallback" : ""]
      .filter(Boolean).join(", ");
    const lp = d.logprob !== null && d.logprob !== undefined ? ` (log π ${num(d.logprob)})` : "";
    return el("tr", {class: "agent-row", "data-agent": a},
      el("td", {}, el("b", {}, a)), el("td", {}, text(s.observations[a])), el("td", {}, text(d.thought)),
      el("td", {}, el("span", {class: d.valid === false ? "bad" : ""}, d.action === undefined ? UNDEFINED : d.action), lp,
        flags ? el("div", {class: "muted"}, flags) : null),
      el("td", {class: "num"}, num((s.rewards || {})[a], 3)));
  });
  box.append(el("table", {}, el("thead", {}, head), el("tbody", {}, rows)));
  return box;
}
function initEpisodes() {
  const runs = episodeRuns();
  if (!runs.length) {
    document.getElementById("episode-view").append(el("p", {class: "muted"}, "No recorded episodes."));
    return;
  }
  fillSelect(pickRun, runs.map(([i, r]) => [i, `${r.name} (${r.episodes_total} episodes)`]));
  pickRun.addEventListener("change", onRun);
  pickIteration.addEventListener("change", onIteration);
  pickEpisode.addEventListener("change", renderEpisode);
  onRun();
}

// ------------------------------------------------------------------------------------- learning
function renderLearning() {
  const body = document.getElementById("learning-body");
  let any = false;
  RUNS.forEach(r => {
    if (!r.updates.length && !r.policies.length && !r.review && !r.credit) return;
    any = true;
    const section = el("div", {class: "card"}, el("h3", {}, `${r.name}: ${r.learner}`));
    const decided = {};
    for (const p of r.policies) decided[`${p.iteration}/${p.agent}`] = p;
    const iterations = [...new Set(r.updates.map(u => u.iteration))];
    for (const it of iterations) {
      const block = el("details", {class: "iteration", open: it === iterations[0] ? "" : null},
        el("summary", {}, `Iteration ${it}`));
      for (const u of r.updates.filter(x => x.iteration === it)) block.append(renderUpdate(u, decided[`${it}/${u.agent}`]));
      section.append(block);
    }
    if (r.review) section.append(el("div", {class: "card"}, el("b", {}, "Waiting for marlang review: "),
      el("pre", {}, JSON.stringify(r.review, null, 2))));
    if (r.credit) section.append(renderCreditFiles(r.credit));
    body.append(section);
  });
  if (!any) body.append(el("p", {class: "muted"}, "No learner records (updates.jsonl, policies.jsonl, credit/)."));
}
function renderUpdate(u, policy) {
  const card = el("div", {class: "card update", "data-agent": u.agent}, el("b", {}, u.agent));
  if (u.trajectories) {  // LangMARL
    const rows = u.trajectories.map(t => el("tr", {}, el("td", {class: "num"}, t.episode),
      el("td", {}, t.credit_failed ? el("span", {class: "bad"}, "credit failed") : text(t.credit)), el("td", {}, text(t.gradient))));
    card.append(el("table", {}, el("thead", {}, el("tr", {}, ["episode", "critic's credit", "update direction"].map(h => el("th", {}, h)))),
      el("tbody", {}, rows)));
    card.append(el("div", {}, el("b", {}, "Aggregated direction: "), text(u.aggregated_gradient)));
  }
  if (u.reflections) {  // Reflexion
    card.append(el("div", {}, el("b", {}, "Reflections"), ...u.reflections.map(x => el("div", {}, `episode ${x.episode}: `, x.text))));
    card.append(el("div", {}, el("b", {}, "Memory after: "), text((u.memory_after || []).join("\n"))));
  }
  if (u.old_policy !== undefined || policy) {
    const before = u.old_policy !== undefined ? u.old_policy : policy.previous;
    const after = u.new_policy !== undefined ? u.new_policy : policy.text;
    card.append(el("div", {class: "policy"}, el("div", {}, el("b", {}, "Policy before"), text(before)),
      el("div", {}, el("b", {}, "Policy after (candidate)"), text(after))));
  }
  const accepted = policy ? policy.accepted : u.accepted;
  if (accepted !== null && accepted !== undefined) {
    const how = policy && policy.decided_by ? ` (decided by ${policy.decided_by})` : "";
    const ev = u.evaluation && u.evaluation.baseline_return !== undefined
      ? ` · check: baseline return ${num(u.evaluation.baseline_return)}, candidate ${num(u.evaluation.candidate_return)}` : "";
    card.append(el("div", {}, accepted ? el("span", {class: "ok"}, "accepted") : el("span", {class: "bad"}, "rejected"), how, ev));
  }
  const numbers = Object.entries(u).filter(([k, v]) => typeof v === "number" && !["iteration"].includes(k));
  if (!u.trajectories && !u.reflections && numbers.length) {  // weight-space updates: their statistics
    card.append(el("table", {}, el("tbody", {}, numbers.map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", {class: "num"}, num(v, 4)))))));
  }
  return card;
}
function renderCreditFiles(credit) {
  const box = el("details", {class: "card"}, el("summary", {}, "Credit assignment (credit/)"));
  for (const [name, content] of Object.entries(credit)) {
    if (content.text !== undefined) { box.append(el("div", {}, el("b", {}, name), el("pre", {}, content.text))); continue; }
    box.append(el("div", {}, el("b", {}, `${name} (${content.rows.length} of ${content.total})`),
      el("pre", {}, content.rows.map(r => JSON.stringify(r)).join("\n"))));
  }
  return box;
}

// ------------------------------------------------------------------------------------------ init
document.getElementById("subtitle").textContent =
  `${RUNS.length} run${RUNS.length === 1 ? "" : "s"} · written ${DATA.written} by marlang ${DATA.version}`;
renderTable();
renderCurves();
renderFronts();
initEpisodes();
renderLearning();
