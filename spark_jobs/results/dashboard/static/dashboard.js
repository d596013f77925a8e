/* Tideline experiment results: polls the API every refresh_ms and re-renders when the
   results change (new version of the final or the provisional table). Times are epoch ms,
   shown in UTC. URLs are relative: the page works at / and under Airflow's /tideline/results/.
   The final results are the verdict of record; the live ones (`live`, from the provisional
   rows, open windows included) get their own marked block, and stand in for the final ones
   only while an experiment has no final window yet. */
"use strict";

const GROUP_COLORS = ["#475467", "#1570ef", "#7a5af8", "#0e9384", "#dd2590", "#e04f16"];
const SEQUENTIAL_FILL = "rgba(21, 112, 239, 0.2)";
const SEQUENTIAL_LINE = "rgba(21, 112, 239, 0.9)";
const BONFERRONI_FILL = "rgba(247, 144, 9, 0.2)";
const BONFERRONI_LINE = "rgba(220, 104, 3, 0.9)";
const PLOT_CONFIG = { responsive: true, displaylogo: false, displayModeBar: false };

const state = {
  key: null,         // table version and as-of of the results on screen
  list: null,        // the last /api/experiments answer
  selected: null,    // experiment hash
  detail: null,      // the last /api/experiments/{hash} answer
  missing: null,     // a selected hash the API does not know
  eventType: null,
  eventTypeOf: null, // the experiment the event type was chosen for
  refreshMs: 10000,
  timer: null,
};

/* ---------- formatting ---------- */

function pad(n) { return String(n).padStart(2, "0"); }

function utc(ms, seconds = false) {
  if (ms === null || ms === undefined) return "—";
  const d = new Date(ms);
  const day = `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())}`;
  const time = `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}` +
    (seconds ? `:${pad(d.getUTCSeconds())}` : "");
  return `${day} ${time}`;
}

function clock(ms) {
  const d = new Date(ms);
  return `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
}

/* Plotly date axes take "YYYY-MM-DD HH:MM:SS" strings without a zone: give them UTC. */
function plotTime(ms) { return new Date(ms).toISOString().slice(0, 19).replace("T", " "); }

function signed(value, digits, suffix = "") {
  if (value === null || value === undefined) return "—";
  const text = Math.abs(value).toFixed(digits);
  if (Number(text) === 0) return `${text}${suffix}`;
  return `${value < 0 ? "−" : "+"}${text}${suffix}`;
}

function percent(value, digits = 1) {
  return value === null || value === undefined ? "—" : `${(value * 100).toFixed(digits)}%`;
}

function lift(value) { return value === null || value === undefined ? "—" : signed(value * 100, 1, "%"); }

function pValue(p) {
  if (p === null || p === undefined) return "—";
  if (p < 0.001) return p.toExponential(1).replace("e-", "e−");
  return p.toFixed(3);
}

function metricValue(metric, value) {
  if (value === null || value === undefined) return "—";
  return metric === "propensity" ? percent(value, 1) : value.toFixed(3);
}

/* treatment − control: percentage points for a rate, actions per user otherwise */
function difference(metric, value) {
  if (value === null || value === undefined) return "—";
  return metric === "propensity" ? signed(value * 100, 2, " pp") : signed(value, 3);
}

function lastOf(values) { return values && values.length ? values[values.length - 1] : null; }

function integer(n) { return n === null || n === undefined ? "—" : n.toLocaleString("en-US"); }

/* ---------- DOM helpers ---------- */

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "className") node.className = value;
    else if (name === "dataset") Object.assign(node.dataset, value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function statusBadge(status, label) {
  return el("span", { className: "status", dataset: { status } }, label);
}

async function getJSON(url) {
  const response = await fetch(url, { cache: "no-store" });
  let body = null;
  try { body = await response.json(); } catch (_) { /* not JSON */ }
  if (!response.ok) {
    const error = new Error((body && body.detail) || `${response.status} ${response.statusText}`);
    error.status = response.status;
    throw error;
  }
  return body;
}

/* ---------- header and list ---------- */

function renderHeader(list, error) {
  const asOf = document.getElementById("as-of");
  const method = document.getElementById("method");
  if (list) {
    const across = { bonferroni: "", holm: " + Holm", bh: " + BH" }[list.correction] || "";
    method.textContent = list.method === "sequential"
      ? `verdicts: mSPRT${across} · α = ${list.alpha}`
      : `verdicts: Bonferroni${across} · α = ${list.alpha}`;
    asOf.dataset.asOf = list.as_of === null ? "" : String(list.as_of);
    asOf.dataset.tableVersion = list.table_version === null ? "" : String(list.table_version);
  }
  if (error) {
    asOf.classList.add("stale");
    asOf.textContent = `cannot reach the results (${error.message}); retrying`;
    return;
  }
  asOf.classList.remove("stale");
  if (!list) return;
  const upTo = list.as_of !== null ? `data up to ${utc(list.as_of)} UTC`
    : list.live_updated_at !== null ? "no final window yet" : "no data yet";
  asOf.textContent = `updated ${clock(list.loaded_at)} UTC, ${upTo}`;
  asOf.title = `last checked ${clock(Date.now())} UTC; refreshes every ${list.refresh_ms / 1000} s`;
}

function headlineText(headline) {
  if (!headline || headline.lift === null) return [el("span", {}, "no comparison yet")];
  const direction = headline.significant ? headline.direction : null;
  return [
    `${headline.event_type} ${headline.metric === "propensity" ? "rate" : "actions/user"} `,
    el("span", { className: `lift ${direction || ""}` }, lift(headline.lift)),
  ];
}

function headlineTitle(h) {
  if (!h || h.lift === null) return null;
  return `${h.event_type} ${h.metric_label} of ${h.treatment_group}: ${lift(h.lift)} ` +
    `[${lift(h.lift_low)}, ${lift(h.lift_high)}] (difference ` +
    `${difference(h.metric, h.difference)}), p = ${pValue(h.p)}`;
}

/* An experiment without a final window yet is listed with its live status and headline. */
function listItem(exp) {
  const shown = exp.final ? exp : exp.live;
  return el("li", {
    className: `${exp.running ? "running" : "ended"}${exp.hash === state.selected ? " selected" : ""}`,
    dataset: { experiment: exp.hash, status: shown.status, running: String(exp.running),
      final: String(exp.final), live: String(Boolean(exp.live)) },
  },
  el("a", { href: `#${encodeURIComponent(exp.hash)}`, title: shown.reason },
    el("div", { className: "item-row" },
      el("span", { className: "name" }, exp.hash),
      statusBadge(shown.status, shown.label)),
    el("div", { className: "item-row" },
      el("span", { className: "headline", title: headlineTitle(shown.headline) },
        ...headlineText(shown.headline)),
      exp.live ? el("span", { className: "tag live", title: "provisional: open windows included" },
        exp.final ? "live" : "live only") : null,
      exp.running ? null : el("span", { className: "tag ended" }, "ended"))));
}

function renderList() {
  const container = document.getElementById("experiments");
  const experiments = state.list ? state.list.experiments : [];
  document.getElementById("experiment-count").textContent =
    experiments.length ? `${experiments.length}` : "";
  container.replaceChildren();
  if (!experiments.length) {
    container.append(el("p", { className: "empty", id: "no-experiments" },
      "No experiment results yet: the experiment_metrics table has no rows. ",
      "This page refreshes by itself when the streaming job writes some."));
    return;
  }
  const running = experiments.filter((e) => e.running);
  const ended = experiments.filter((e) => !e.running);
  for (const [title, group] of [["Running", running], ["Ended", ended]]) {
    if (!group.length) continue;
    container.append(el("div", { className: "list-section" }, title),
      el("ul", {}, group.map(listItem)));
  }
}

/* ---------- detail ---------- */

function showPlaceholder(text, isError = false) {
  const placeholder = document.getElementById("placeholder");
  placeholder.textContent = text;
  placeholder.classList.toggle("error", isError);
  placeholder.hidden = false;
  document.getElementById("experiment").hidden = true;
}

function usersText(triggered) {
  return Object.entries(triggered).map(([group, n]) => `${group} ${integer(n)}`).join(" · ");
}

function renderVerdict(detail) {
  const verdict = document.getElementById("verdict");
  verdict.dataset.status = detail.status;
  verdict.dataset.method = detail.method;
  document.getElementById("verdict-label").textContent = detail.label;
  document.getElementById("verdict-reason").textContent = detail.reason;
  verdict.querySelector(".verdict-facts").hidden = !detail.final; // nothing final to describe
  document.getElementById("verdict-test").textContent = detail.test;
  document.getElementById("verdict-alpha").textContent = `α = ${detail.alpha}`;
  document.getElementById("verdict-srm-alpha").textContent = `(mismatch < ${detail.srm_alpha})`;
  document.getElementById("verdict-srm").textContent = detail.srm_p === null
    ? "n/a (no allocation)" : pValue(detail.srm_p);
  document.getElementById("verdict-looks").textContent =
    `${detail.looks} of ${detail.planned_looks} planned · ${detail.comparisons} comparisons`;
  document.getElementById("verdict-users").textContent = usersText(detail.triggered_users);
  const plan = detail.plan;
  const planCell = document.getElementById("verdict-plan");
  planCell.dataset.progress = plan ? String(plan.progress) : "";
  planCell.textContent = plan
    ? `${plan.progress >= 1 ? "target reached" : `${percent(plan.progress, 0)} of target`} · ` +
      `${integer(plan.control_users)} control + ${integer(plan.treatment_users)} ` +
      `${plan.treatment_group} users detect a ${percent(plan.target_mde, 1)} lift with ` +
      `${percent(plan.target_power, 0)} power (${plan.event_type} ${plan.metric_label})`
    : "n/a (no control value yet)";
}

function renderEventTypes(detail) {
  const container = document.getElementById("event-types");
  container.replaceChildren(...detail.event_types.map((event) => el("button", {
    type: "button", role: "tab", dataset: { eventType: event },
    "aria-selected": String(event === state.eventType),
    onclick: () => { state.eventType = event; renderDetail(); },
  }, event, detail.guardrail_events.includes(event)
    ? el("span", { className: "tag guardrail" }, "guardrail") : null)));
}

function groupsInOrder(experiment) {
  const verdict = experiment.verdict;
  const treatments = new Set(verdict.metrics.map((m) => m.treatment_group));
  const groups = Object.keys(verdict.bands);
  const controls = groups.filter((g) => !treatments.has(g));
  return [...controls, ...groups.filter((g) => treatments.has(g))];
}

function axisLayout(yTitle, ySuffix) {
  return {
    margin: { l: 64, r: 16, t: 36, b: 52 },
    font: { family: "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif", size: 12,
      color: "#344054" },
    paper_bgcolor: "#fff",
    plot_bgcolor: "#fff",
    hovermode: "x unified",
    legend: { orientation: "h", x: 0, xanchor: "left", y: 1.02, yanchor: "bottom",
      font: { size: 11.5 } },
    xaxis: { type: "date", title: { text: "window end (UTC)", standoff: 8 },
      gridcolor: "#f2f4f7", linecolor: "#d0d5dd", tickformat: "%H:%M\n%b %d",
      hoverformat: "%Y-%m-%d %H:%M UTC" },
    yaxis: { title: { text: yTitle, standoff: 6 }, gridcolor: "#eaecf0",
      zerolinecolor: "#98a2b3", ticksuffix: ySuffix, automargin: true },
  };
}

function scale(values, factor) {
  return values.map((v) => (v === null || v === undefined ? null : v * factor));
}

function hexToRgba(hex, alpha) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255}, ${(n >> 8) & 255}, ${n & 255}, ${alpha})`;
}

function bandTraces(name, x, low, high, fill, line, group, showLegend, dash = "solid") {
  const edge = { color: line, width: line === "transparent" ? 0 : 1, dash };
  return [
    { x, y: low, type: "scatter", mode: "lines", line: edge, legendgroup: group,
      showlegend: false, hoverinfo: "skip", name: `${name} low` },
    { x, y: high, type: "scatter", mode: "lines", line: edge, fill: fill ? "tonexty" : "none",
      fillcolor: fill || undefined, legendgroup: group, showlegend: showLegend,
      hoverinfo: "skip", name },
  ];
}

function groupChart(experiment, metric, event) {
  const factor = metric === "propensity" ? 100 : 1;
  const traces = [];
  groupsInOrder(experiment).forEach((group, index) => {
    const band = (experiment.verdict.bands[group] || {})[event];
    if (!band || !band[metric]) return;
    const b = band[metric];
    const color = GROUP_COLORS[index % GROUP_COLORS.length];
    const x = b.window_end.map(plotTime);
    traces.push(...bandTraces(`${group} 95% interval`, x, scale(b.low, factor),
      scale(b.high, factor), hexToRgba(color, 0.16), "transparent", group, false));
    traces.push({
      x, y: scale(b.value, factor), type: "scatter", mode: "lines+markers", name: group,
      legendgroup: group, line: { color, width: 2 }, marker: { size: 5, color },
      hovertemplate: metric === "propensity" ? "%{y:.2f}%" : "%{y:.3f}",
    });
  });
  const layout = metric === "propensity"
    ? axisLayout("share of triggered users", "%")
    : axisLayout("actions per triggered user", "");
  return { traces, layout };
}

function liftChart(experiment, metric, event, method) {
  const factor = metric === "propensity" ? 100 : 1;
  const suffix = metric === "propensity" ? " pp" : "";
  const results = experiment.verdict.metrics.filter(
    (m) => m.metric === metric && m.event_type === event);
  const traces = [];
  const several = results.length > 1;
  // the band of the test the verdict uses is shaded, the other one drawn as dashed edges
  const sequentialUsed = method === "sequential";
  results.forEach((m, index) => {
    const x = m.window_end.map(plotTime);
    const prefix = several ? `${m.treatment_group}: ` : "";
    const color = GROUP_COLORS[(index + 1) % GROUP_COLORS.length];
    const bands = [
      [`${prefix}sequential (mSPRT)`, m.sequential_low, m.sequential_high, SEQUENTIAL_FILL,
        SEQUENTIAL_LINE, sequentialUsed],
      [`${prefix}Bonferroni`, m.bonferroni_low, m.bonferroni_high, BONFERRONI_FILL,
        BONFERRONI_LINE, !sequentialUsed],
    ];
    bands.sort((a, b) => Number(b[5]) - Number(a[5])); // shaded band first, under the edges
    for (const [name, low, high, fill, line, used] of bands) {
      traces.push(...bandTraces(name, x, scale(low, factor), scale(high, factor),
        used ? fill : null, used ? "transparent" : line,
        `${m.treatment_group}-${name}`, true, used ? "solid" : "dash"));
    }
    traces.push({
      x, y: scale(m.difference, factor), type: "scatter", mode: "lines+markers",
      name: `${prefix}difference`, line: { color: several ? color : "#101828", width: 2 },
      marker: { size: 5, color: several ? color : "#101828" },
      hovertemplate: metric === "propensity" ? "%{y:.2f} pp" : "%{y:.3f}",
    });
  });
  const title = metric === "propensity" ? "treatment − control rate" : "treatment − control";
  const layout = axisLayout(title, suffix);
  layout.yaxis.zeroline = true;
  layout.yaxis.zerolinewidth = 1.5;
  return { traces, layout };
}

function renderCharts(experiment, event, method) {
  const charts = [
    ["chart-propensity", groupChart(experiment, "propensity", event)],
    ["chart-volume", groupChart(experiment, "volume", event)],
    ["chart-lift-propensity", liftChart(experiment, "propensity", event, method)],
    ["chart-lift-volume", liftChart(experiment, "volume", event, method)],
  ];
  for (const [id, chart] of charts) {
    Plotly.react(id, chart.traces, chart.layout, PLOT_CONFIG);
  }
}

function renderTable(detail) {
  // the column of the p-value the verdict uses
  const method = detail.method === "sequential" ? "sequential" : detail.correction;
  const table = document.getElementById("comparisons");
  for (const th of table.querySelectorAll("th[data-p]")) {
    th.classList.toggle("decisive", th.dataset.p === method);
    th.title = th.dataset.p === method ? "the p-value the verdict uses" : "";
  }
  const metrics = sortedMetrics(detail.experiment.verdict.metrics, detail.event_types);
  table.classList.toggle("single-group", new Set(metrics.map((m) => m.treatment_group)).size <= 1);
  const rows = metrics.map((m) => {
    const decisive = (kind) => `num${kind === method ? " decisive" : ""}`;
    return comparisonRow(m, detail,
      el("td", { className: decisive("fixed") }, pValue(m.p_fixed)),
      el("td", { className: decisive("bonferroni") }, pValue(m.p_bonferroni)),
      el("td", { className: decisive("holm") }, pValue(m.p_holm)),
      el("td", { className: decisive("bh") }, pValue(m.p_bh)),
      el("td", { className: decisive("sequential") }, pValue(m.p_sequential)),
      cupedCell(m),
      el("td", { className: "num", dataset: { cell: "plan" } }, m.plan
        ? `±${percent(m.plan.mde, 1)} · ${percent(m.plan.power, 0)}` : "—"));
  });
  table.tBodies[0].replaceChildren(...rows);
}

/* The CUPED-adjusted difference with its interval and the variance it removes ("—" when
   the rows carry no pre-exposure sums). */
function cupedCell(m) {
  if (m.cuped_difference === null || m.cuped_difference === undefined) {
    return el("td", { className: "num muted", dataset: { cell: "cuped" } }, "—");
  }
  return el("td", { className: "num", dataset: { cell: "cuped" } },
    difference(m.metric, m.cuped_difference), " ", el("span", { className: "interval" },
      `[${difference(m.metric, m.cuped_low)}, ${difference(m.metric, m.cuped_high)}]`),
    " · ", el("span", { className: "reduction" }, `−${percent(m.cuped_reduction, 0)}`));
}

function sortedMetrics(metrics, order) {
  return [...metrics].sort((a, b) =>
    order.indexOf(a.event_type) - order.indexOf(b.event_type) ||
    a.treatment_group.localeCompare(b.treatment_group) || a.metric.localeCompare(b.metric));
}

/* One comparison's row: group, event type, metric, values, difference and lift, then the
   given p-value cells, then its significance (shared by the final and the live table). */
function comparisonRow(m, detail, ...pCells) {
  const significance = m.significant
    ? el("span", { className: `sig-${m.direction}` }, m.direction === "up" ? "↑ up" : "↓ down")
    : el("span", { className: "muted" }, "—");
  return el("tr", {
    className: m.event_type === state.eventType ? "current" : null,
    dataset: { eventType: m.event_type, metric: m.metric, group: m.treatment_group,
      significant: String(m.significant), direction: m.direction || "",
      guardrail: String(m.guardrail) },
  },
  el("td", { className: "group" }, m.treatment_group),
  el("td", {}, m.event_type, " ", m.guardrail ? el("span", { className: "tag guardrail" },
    "guardrail") : null),
  el("td", {}, detail.metric_labels[m.metric] || m.metric),
  el("td", { className: "num" }, metricValue(m.metric, m.control)),
  el("td", { className: "num" }, metricValue(m.metric, m.treatment)),
  el("td", { className: "num", dataset: { cell: "difference" } },
    difference(m.metric, lastOf(m.difference)), " ", el("span", { className: "interval" },
      `[${difference(m.metric, m.difference_low)}, ${difference(m.metric, m.difference_high)}]`)),
  el("td", { className: "num", dataset: { cell: "lift" } }, lift(m.lift), " ",
    el("span", { className: "interval" }, `[${lift(m.lift_low)}, ${lift(m.lift_high)}]`)),
  ...pCells,
  el("td", {}, significance));
}

/* The live block: the provisional statistics, when they add something to the final ones. */
function renderLive(detail) {
  const live = detail.live;
  const section = document.getElementById("live");
  section.hidden = !live;
  if (!live) return;
  section.dataset.status = live.status;
  section.dataset.updatedAt = String(live.updated_at);
  const upTo = live.watermark === null ? "no window final yet"
    : `final windows up to ${utc(live.watermark)} UTC`;
  document.getElementById("live-updated").textContent =
    `updated ${utc(live.updated_at, true)} UTC · ${upTo}`;
  document.getElementById("live-status").replaceChildren(statusBadge(live.status, live.label));
  document.getElementById("live-reason").textContent = live.reason;
  document.getElementById("live-users").textContent = usersText(live.triggered_users);
  const table = document.getElementById("live-comparisons");
  const metrics = sortedMetrics(live.verdict.metrics, detail.event_types);
  table.classList.toggle("single-group", new Set(metrics.map((m) => m.treatment_group)).size <= 1);
  table.tBodies[0].replaceChildren(...metrics.map((m) => comparisonRow(m, detail,
    el("td", { className: "num decisive" }, pValue(m.p_verdict)))));
}

function renderDetail() {
  const detail = state.detail;
  if (state.missing) {
    showPlaceholder(`No experiment "${state.missing}" in the results.`, true);
    return;
  }
  if (!detail) {
    const empty = state.list && !state.list.experiments.length;
    showPlaceholder(empty ? "Nothing to show yet." : "Select an experiment.");
    return;
  }
  // another experiment opens on the event type of its headline; a refresh keeps the choice
  if (state.eventTypeOf !== detail.hash || !detail.event_types.includes(state.eventType)) {
    state.eventTypeOf = detail.hash;
    const headline = detail.final ? detail.headline : detail.live.headline;
    state.eventType = headline && headline.significant && detail.event_types.includes(
      headline.event_type) ? headline.event_type : detail.event_types[0] || null;
  }
  document.getElementById("placeholder").hidden = true;
  const root = document.getElementById("experiment");
  root.hidden = false;
  root.dataset.experiment = detail.hash;
  document.getElementById("experiment-name").textContent = detail.hash;
  document.getElementById("experiment-period").textContent =
    `period ${utc(detail.period_start)} → ${utc(detail.period_end)} UTC · ` +
    `${detail.running ? "running" : "ended"} · ` + (detail.final
      ? `latest window ${utc(detail.latest_window_end)}` : "no window final yet");
  renderVerdict(detail);
  renderLive(detail);
  renderEventTypes(detail);
  // the charts of the final windows; of the live look while no window is final
  const charted = detail.final ? detail.experiment : { verdict: detail.live.verdict };
  renderCharts(charted, state.eventType, detail.method);
  document.getElementById("final-table").hidden = !detail.final;
  renderTable(detail);
}

async function loadDetail() {
  const hash = state.selected;
  if (!hash) {
    state.detail = null;
    state.missing = null;
    renderDetail();
    return;
  }
  try {
    const detail = await getJSON(`api/experiments/${encodeURIComponent(hash)}`);
    if (hash !== state.selected) return; // the selection changed meanwhile
    state.detail = detail;
    state.missing = null;
  } catch (error) {
    if (hash !== state.selected) return;
    state.detail = null;
    if (error.status === 404) state.missing = hash;
    else { showPlaceholder(`Cannot load ${hash}: ${error.message}`, true); return; }
  }
  renderDetail();
}

/* ---------- selection and polling ---------- */

function selectFromHash() {
  const fromHash = decodeURIComponent(window.location.hash.replace(/^#/, ""));
  const experiments = state.list ? state.list.experiments : [];
  state.selected = fromHash || (experiments.length ? experiments[0].hash : null);
  for (const item of document.querySelectorAll("#experiments li")) {
    item.classList.toggle("selected", item.dataset.experiment === state.selected);
  }
}

async function poll() {
  clearTimeout(state.timer);
  try {
    const list = await getJSON("api/experiments");
    state.refreshMs = list.refresh_ms || state.refreshMs;
    const key = `${list.table_version}|${list.live_version}|${list.as_of}|${list.loaded_at}`;
    if (key !== state.key) {
      state.key = key;
      state.list = list;
      selectFromHash();
      renderList();
      await loadDetail();
    }
    renderHeader(list, null);
  } catch (error) {
    renderHeader(state.list, error);
    if (!state.list) showPlaceholder(`Cannot load the results: ${error.message}`, true);
  } finally {
    state.timer = setTimeout(poll, state.refreshMs);
  }
}

window.addEventListener("hashchange", () => {
  selectFromHash();
  loadDetail();
});

poll();
