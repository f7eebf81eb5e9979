// A small SVG line chart for the rate history (no library: four series of at most 120
// points each). drawRates(container, history) draws history.samples, [{at, FIELD: rate}],
// over the last history.window seconds, and leaves each series' latest value in the legend.
"use strict";
const RATE_SERIES = [
  ["published", "Published", "#1f77b4"], ["delivered", "Delivered", "#2ca02c"],
  ["acked", "Acked", "#9467bd"], ["forwarded", "Forwarded", "#ff7f0e"]];
const SVG_NS = "http://www.w3.org/2000/svg";

function svgElement(name, attributes) {
  const element = document.createElementNS(SVG_NS, name);
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, String(value));
  return element;
}

function niceMaximum(value) {
  if (value <= 1) return 1;
  const power = Math.pow(10, Math.floor(Math.log10(value)));
  for (const step of [1, 2, 5, 10]) if (value <= step * power) return step * power;
  return 10 * power;
}

function drawRates(container, history) {
  const width = 720, height = 180, left = 48, bottom = 20, top = 8;
  const samples = history.samples || [];
  const end = history.now, start = end - history.window;
  const top_value = niceMaximum(Math.max(0, ...samples.flatMap(s => RATE_SERIES.map(([f]) => s[f] || 0))));
  const x = at => left + (width - left) * Math.max(0, at - start) / history.window;
  const y = value => top + (height - top - bottom) * (1 - value / top_value);
  const svg = svgElement("svg", {viewBox: `0 0 ${width} ${height}`, width, height, role: "img",
                                 "aria-label": "message rates per second"});
  for (const fraction of [0, 0.5, 1]) {
    const value = top_value * fraction;
    svg.appendChild(svgElement("line", {x1: left, x2: width, y1: y(value), y2: y(value), class: "grid"}));
    const label = svgElement("text", {x: left - 4, y: y(value) + 4, "text-anchor": "end", class: "axis"});
    label.textContent = value % 1 ? value.toFixed(1) : String(value);
    svg.appendChild(label);
  }
  for (const [minutes, anchor] of [[10, "start"], [5, "middle"], [0, "end"]]) {
    const label = svgElement("text", {x: x(end - minutes * 60), y: height - 4, "text-anchor": anchor,
                                      class: "axis"});
    label.textContent = minutes ? `-${minutes} min` : "now";
    svg.appendChild(label);
  }
  const legend = document.createElement("ul");
  legend.className = "legend";
  for (const [field, title, colour] of RATE_SERIES) {
    const points = samples.map(s => `${x(s.at).toFixed(1)},${y(s[field] || 0).toFixed(1)}`);
    if (points.length) {
      svg.appendChild(svgElement("polyline", {points: points.join(" "), fill: "none", stroke: colour,
                                              "stroke-width": 2, "data-series": field}));
    }
    const item = document.createElement("li");
    item.dataset.series = field;
    item.style.borderColor = colour;
    const latest = samples.length ? samples[samples.length - 1][field] : null;
    item.textContent = `${title}: ${latest == null ? "-" : latest.toFixed(1)}/s`;
    legend.appendChild(item);
  }
  container.replaceChildren(svg, legend);
  container.dataset.samples = String(samples.length);
}
