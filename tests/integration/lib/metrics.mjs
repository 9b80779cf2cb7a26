// Reads hotspan's Prometheus text from the admin port: {`name{labels}`: value}, with labels
// sorted by name (so `hotspan_receiver_accepted_spans_total{receiver="otlp",transport="http"}`).
import { request } from './http.mjs';

/** Parses Prometheus text exposition format 0.0.4 into {key: number}. */
export function parsePrometheus(text) {
  const out = {};
  for (const rawLine of text.split('\n')) {
    const line = rawLine.trim();
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?$/.exec(line);
    if (!m) throw new Error(`bad Prometheus line: ${JSON.stringify(rawLine)}`);
    const [, name, labelText = '', valueText] = m;
    const labels = [];
    const re = /\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?/gy;
    let lm;
    let consumed = 0;
    while ((lm = re.exec(labelText)) !== null) {
      labels.push([lm[1], lm[2]]);
      consumed = re.lastIndex;
    }
    if (labelText.slice(consumed).trim() !== '') {
      throw new Error(`bad Prometheus labels: ${JSON.stringify(rawLine)}`);
    }
    labels.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
    const key = labels.length ? `${name}{${labels.map(([k, v]) => `${k}="${v}"`).join(',')}}` : name;
    const value = valueText === '+Inf' ? Infinity : valueText === '-Inf' ? -Infinity : Number(valueText);
    if (Number.isNaN(value) && valueText !== 'NaN') {
      throw new Error(`bad Prometheus value: ${JSON.stringify(rawLine)}`);
    }
    out[key] = value;
  }
  return out;
}

/** GET /metrics from the admin port; returns the parsed map (throws unless 200). */
export async function fetchMetrics(adminPort) {
  const res = await request({ port: adminPort, method: 'GET', path: '/metrics' });
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}: ${res.body}`);
  return parsePrometheus(res.body.toString('utf8'));
}

/** metric(m, 'name', {a: 'x'}) → value, or undefined when absent. */
export function metric(m, name, labels = {}) {
  const ls = Object.entries(labels).sort((a, b) => (a[0] < b[0] ? -1 : 1));
  const key = ls.length ? `${name}{${ls.map(([k, v]) => `${k}="${v}"`).join(',')}}` : name;
  return m[key];
}

/** Sum of every series of `name` (any labels). */
export function metricSum(m, name) {
  let sum = 0;
  for (const [k, v] of Object.entries(m)) {
    if (k === name || k.startsWith(`${name}{`)) sum += v;
  }
  return sum;
}
