// Correlation quality on a Node service in steady state: @pyroscope/nodejs uploads every
// flushIntervalMs (60 s by default), longer than the correlator's default max_wait (30 s). A
// slow span that ends just after an upload is covered only by the next one, more than max_wait
// later: the correlator learned the service's upload period from its profiles and holds the
// span until that upload is due (+ a quarter period, at most max_wait_cap), so it leaves matched
// exactly instead of timing out. The flush is 36 s here: far enough above max_wait that a span
// ending just after one upload is released by the next one later than max_wait would have
// released it, and a test of a bit over a minute.
//
// The plan: a slow request at once (it waits for the first upload: cold start), a pause past the
// first upload, then slow requests that end just after it; the app keeps profiling until its
// second upload, which releases them.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startHotspan } from './lib/hotspan.mjs';
import { startSink } from './lib/sink.mjs';
import { startPyroscopeSink } from './lib/pyroscope_sink.mjs';
import { fetchMetrics, metric } from './lib/metrics.mjs';
import {
  runNodeApp, qualityConfig, attrs, show, parseEntry, names, firstProfileMs,
} from './lib/quality.mjs';

const MAX_WAIT_MS = 30000; // the correlator's default, which this config keeps
const FLUSH_MS = 36000;
const PLAN = [
  { kind: 'sign', ms: 400, slow: true },
  { kind: 'pause', ms: FLUSH_MS + 2000 },
  { kind: 'sign', ms: 400, slow: true }, { kind: 'wait', ms: 3 },
  { kind: 'wait', ms: 400, slow: true }, { kind: 'sign', ms: 3 },
];

describe('correlation quality: a Node service uploading less often than max_wait', () => {
  let sink;
  let psink;
  let hs;
  let report;
  let metrics;
  let firstUpload;
  const byId = new Map();

  before(async () => {
    sink = await startSink();
    psink = await startPyroscopeSink();
    // max_wait and max_wait_cap as a user gets them (undefined keys are left out)
    hs = await startHotspan(qualityConfig({ sinkPort: sink.port, psinkPort: psink.port,
      correlator: { max_wait: undefined } }), { waitFor: ['otlp', 'pyroscope', 'admin'] });
    report = await runNodeApp({
      otlpUrls: [`http://127.0.0.1:${hs.ports.otlp}/v1/traces`],
      pyroscopeUrl: `http://127.0.0.1:${hs.ports.pyroscope}`,
      // profiling goes on until just after the second regular upload
      env: { FLUSH_MS: String(FLUSH_MS), PLAN: JSON.stringify(PLAN), PAUSE_MS: '100',
        TAIL_MS: String(FLUSH_MS + 1000) },
    });
    assert.equal(report.failed, 0, 'hotspan took every span');
    await sink.waitForSpans(report.exported, 20000);
    const arrived = new Map(sink.requests.map((r) => [r.seq, r.time]));
    for (const s of sink.spans()) byId.set(s.span.spanId, { span: s.span, at: arrived.get(s.request) });
    firstUpload = firstProfileMs(psink, report.service);
    metrics = await fetchMetrics(hs.ports.admin);
  });

  after(async () => {
    if (hs) {
      const r = await hs.stop();
      assert.equal(r.code, 0, `hotspan exit code on SIGTERM\n${r.logs.join('\n')}`);
    }
    if (sink) await sink.stop();
    if (psink) await psink.stop();
  });

  const slow = () => report.spans.filter((t) => t.slow);
  const steady = () => slow().filter((t) => t.endNs / 1e6 > firstUpload);

  it('the app ran the plan: slow spans before and after its first upload', () => {
    assert.equal(byId.size, report.exported, 'every span arrived, once');
    assert.equal(slow().length, 3);
    assert.equal(steady().length, 2, `two slow spans ended after the first upload (${firstUpload})`);
  });

  it('spans that ended after an upload wait past max_wait for the next one and match exactly', () => {
    for (const t of steady()) {
      const { span, at } = byId.get(t.spanId);
      const a = attrs(span);
      assert.equal(a['profile.match'], 'span', `${t.kind} ${t.spanId}: ${show(a)}`);
      const fn = t.kind === 'sign' ? 'verifyPassword' : 'fetchRates';
      const list = t.kind === 'sign' ? a['profile.top_functions'] : a['profile.offcpu.top_functions'];
      assert.ok(Array.isArray(list) && names(parseEntry(list[0]).name, fn), `${fn} first: ${show(a)}`);
      const waited = at - t.endNs / 1e6;
      assert.ok(waited > MAX_WAIT_MS, `${t.kind} left ${waited.toFixed(0)} ms after it ended: it ` +
        'was released by its service\'s next upload, after max_wait');
    }
    const ext = (outcome) => metric(metrics, 'hotspan_correlator_extended_waits_total',
      { processor: 'correlator', outcome }) ?? 0;
    assert.equal(ext('profile'), steady().length, JSON.stringify(metrics));
    assert.equal(ext('timeout') + ext('capped'), 0);
    assert.equal(metric(metrics, 'hotspan_correlator_released_by_timeout_total',
      { processor: 'correlator' }), 0);
  });

  it('the span that ended before the first upload waited for it', () => {
    const cold = slow().filter((t) => t.endNs / 1e6 < firstUpload);
    assert.equal(cold.length, 1);
    const a = attrs(byId.get(cold[0].spanId).span);
    assert.equal(a['profile.match'], 'span', show(a));
  });
});
