// Backpressure end to end: with the backend down and a tiny sending queue, hotspan must refuse
// new data with 503 + Retry-After (not buffer without bound, not drop silently) and count it;
// once the backend is back, every span it accepted (answered 200) arrives exactly once, and no
// refused span ever does. SIGTERM then exits 0.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startHotspan } from './lib/hotspan.mjs';
import { startSink } from './lib/sink.mjs';
import { fetchMetrics, metric } from './lib/metrics.mjs';
import { postProto } from './lib/http.mjs';
import * as otlp from './lib/otlp.mjs';

const RECV = { receiver: 'otlp', transport: 'http' };

describe('backpressure: backend down, small queue', () => {
  let sink;
  let hs;
  const accepted = new Set();
  const refused = new Set();
  let refusals = 0;

  before(async () => {
    sink = await startSink();
    await sink.down(); // the port is known; nothing listens there now
    hs = await startHotspan(`receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:0
processors:
  batch: {send_batch_size: 100, timeout: 50ms}
exporters:
  otlp:
    endpoint: http://127.0.0.1:${sink.port}
    sending_queue: {queue_size: 2, num_consumers: 1}
    retry_on_failure: {initial_interval: 100ms, max_interval: 200ms, max_elapsed_time: 0}
service:
  telemetry:
    admin: 127.0.0.1:0
    log_level: info
  pipelines:
    traces: {receivers: [otlp], processors: [batch], exporters: [otlp]}
`);
  });

  after(async () => {
    if (hs) await hs.stop().catch(() => {});
    if (sink) await sink.stop();
  });

  it('refuses with 503 + Retry-After once the queue is full', async () => {
    let first503 = null;
    for (let i = 0; i < 40 && !first503; i += 1) {
      const spans = Array.from({ length: 100 }, (_, k) => otlp.makeSpan({ name: `bp-${i}-${k}` }));
      const res = await postProto(hs.ports.otlp, otlp.encodeRequest(spans));
      if (res.status === 200) {
        for (const s of spans) accepted.add(s.spanId);
      } else if (res.status === 503 || res.status === 429) {
        for (const s of spans) refused.add(s.spanId);
        refusals += 1;
        if (res.status === 503) first503 = res;
        else assert.fail(`request ${i} answered 429; expected 503 for a full exporter queue`);
      } else {
        assert.fail(`request ${i} answered ${res.status}: ${res.body}`);
      }
      // let the batch processor hand its batch to the exporter (timeout 50ms)
      await new Promise((r) => setTimeout(r, 60));
    }
    assert.ok(first503, `no 503 after ${accepted.size / 100} accepted requests of 100 spans ` +
      '(queue_size 2, num_consumers 1, backend down)');
    assert.ok(first503.headers['retry-after'], '503 without a Retry-After header');
    assert.match(first503.headers['retry-after'], /^\d+$|GMT$/, 'Retry-After is seconds or an HTTP-date');
    assert.match(String(first503.headers['content-type']), /^application\/x-protobuf/);
    const st = otlp.decodeRpcStatus(first503.body);
    assert.ok(st.message.length > 0, 'the 503 carries a google.rpc.Status with a message');
    // it accepted some before refusing: the queue holds data while the backend is down
    assert.ok(accepted.size >= 100, 'nothing was accepted before the first 503');
    // a bounded amount: queue (2) + in flight (1) + the batch being built, in 100-span batches
    assert.ok(accepted.size <= 1000, `accepted ${accepted.size} spans with a queue of 2 batches`);
  });

  it('/metrics counts the refused spans and a bounded queue', async () => {
    const m = await fetchMetrics(hs.ports.admin);
    const ref = metric(m, 'hotspan_receiver_refused_spans_total', RECV);
    assert.ok(ref > 0, `hotspan_receiver_refused_spans_total{receiver="otlp",transport="http"} = ${ref}`);
    assert.equal(ref, refused.size, 'refused spans counted');
    assert.equal(metric(m, 'hotspan_receiver_accepted_spans_total', RECV), accepted.size,
      'accepted spans counted');
    const q = metric(m, 'hotspan_exporter_queue_size', { exporter: 'otlp' });
    assert.notEqual(q, undefined, 'hotspan_exporter_queue_size{exporter="otlp"} is exported');
    assert.ok(q <= 2, `hotspan_exporter_queue_size{exporter="otlp"} = ${q} > queue_size 2`);
    assert.equal(metric(m, 'hotspan_exporter_sent_spans_total', { exporter: 'otlp' }) ?? 0, 0,
      'nothing can have been sent yet');
  });

  it('after the backend returns, every accepted span arrives exactly once, refused ones never', async () => {
    await sink.up();
    await sink.waitForSpans(accepted.size, 15000);
    // give duplicates (a retry of something already delivered) a moment to show up
    await new Promise((r) => setTimeout(r, 500));
    const ids = sink.spans().map((s) => s.span.spanId);
    const counts = new Map();
    for (const id of ids) counts.set(id, (counts.get(id) || 0) + 1);
    const dup = [...counts].filter(([, n]) => n > 1);
    assert.deepEqual(dup, [], 'spans delivered more than once');
    const leaked = ids.filter((id) => refused.has(id));
    assert.deepEqual(leaked, [], 'refused spans (answered 503) were delivered');
    const missing = [...accepted].filter((id) => !counts.has(id));
    assert.deepEqual(missing, [], 'accepted spans never delivered');
    assert.equal(ids.length, accepted.size);

    let m;
    const deadline = Date.now() + 3000;
    do {
      m = await fetchMetrics(hs.ports.admin);
      if (metric(m, 'hotspan_exporter_sent_spans_total', { exporter: 'otlp' }) === accepted.size) break;
      await new Promise((r) => setTimeout(r, 50));
    } while (Date.now() < deadline);
    assert.equal(metric(m, 'hotspan_exporter_sent_spans_total', { exporter: 'otlp' }), accepted.size,
      'hotspan_exporter_sent_spans_total{exporter="otlp"}');
    assert.equal(metric(m, 'hotspan_exporter_queue_size', { exporter: 'otlp' }), 0, 'queue drained');
  });

  it('accepts again once drained, then SIGTERM exits 0', async () => {
    const s = otlp.makeSpan({ name: 'bp-after' });
    const res = await postProto(hs.ports.otlp, otlp.encodeRequest([s]));
    assert.equal(res.status, 200);
    await sink.waitFor(() => sink.spans().some((x) => x.span.spanId === s.spanId), 5000,
      () => 'the span sent after recovery did not arrive');
    const r = await hs.stop();
    assert.equal(r.code, 0, `exit code on SIGTERM\n${r.logs.slice(-30).join('\n')}`);
  });
});

describe('backend answers 503 + Retry-After, then 400', () => {
  let sink;
  let hs;

  before(async () => {
    sink = await startSink();
    hs = await startHotspan(`receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:0
processors:
  batch: {send_batch_size: 100, timeout: 50ms}
exporters:
  otlp:
    endpoint: http://127.0.0.1:${sink.port}
    sending_queue: {queue_size: 2, num_consumers: 1}
    retry_on_failure: {initial_interval: 100ms, max_interval: 200ms, max_elapsed_time: 0}
service:
  telemetry:
    admin: 127.0.0.1:0
  pipelines:
    traces: {receivers: [otlp], processors: [batch], exporters: [otlp]}
`);
  });

  after(async () => {
    if (hs) {
      const r = await hs.stop();
      assert.equal(r.code, 0, `exit code on SIGTERM\n${r.logs.slice(-30).join('\n')}`);
    }
    if (sink) await sink.stop();
  });

  const carrying = (ids) => sink.requests.filter((r) => r.decoded &&
    otlp.flattenSpans(r.decoded).some((s) => ids.has(s.span.spanId)));

  it('retries a 503, honouring Retry-After, and delivers exactly once', async () => {
    sink.respondWith({ status: 503, headers: { 'retry-after': '1', 'content-type': 'text/plain' },
      body: 'busy' }, 2);
    const spans = Array.from({ length: 10 }, () => otlp.makeSpan());
    const ids = new Set(spans.map((s) => s.spanId));
    const res = await postProto(hs.ports.otlp, otlp.encodeRequest(spans));
    assert.equal(res.status, 200);
    await sink.waitFor(() => sink.spans().filter((s) => ids.has(s.span.spanId)).length >= 10, 10000,
      () => `attempts so far: ${carrying(ids).map((r) => r.status).join(',')}`);
    const attempts = carrying(ids);
    assert.deepEqual(attempts.map((r) => r.status), [503, 503, 200], 'attempts and their answers');
    for (let i = 1; i < attempts.length; i += 1) {
      const gap = attempts[i].time - attempts[i - 1].time;
      assert.ok(gap >= 900, `retry ${i} came ${gap} ms after a 503 with Retry-After: 1`);
    }
    assert.equal(sink.spans().filter((s) => ids.has(s.span.spanId)).length, 10, 'delivered once');
  });

  it('does not retry a 400 and counts the spans as failed', async () => {
    const before = await fetchMetrics(hs.ports.admin);
    const failed0 = metric(before, 'hotspan_exporter_send_failed_spans_total', { exporter: 'otlp' }) ?? 0;
    sink.respondWith({ status: 400, headers: { 'content-type': 'text/plain' }, body: 'bad' }, 1);
    const spans = Array.from({ length: 5 }, () => otlp.makeSpan());
    const ids = new Set(spans.map((s) => s.spanId));
    const res = await postProto(hs.ports.otlp, otlp.encodeRequest(spans));
    assert.equal(res.status, 200);
    await sink.waitFor(() => carrying(ids).length >= 1, 5000, () => 'the batch never reached the sink');
    // retries would come within max_interval (200 ms): wait well past it
    await new Promise((r) => setTimeout(r, 800));
    assert.deepEqual(carrying(ids).map((r) => r.status), [400], 'a 400 must not be retried');
    let m;
    const deadline = Date.now() + 3000;
    do {
      m = await fetchMetrics(hs.ports.admin);
      if ((metric(m, 'hotspan_exporter_send_failed_spans_total', { exporter: 'otlp' }) ?? 0) >= failed0 + 5) break;
      await new Promise((r) => setTimeout(r, 50));
    } while (Date.now() < deadline);
    assert.equal(metric(m, 'hotspan_exporter_send_failed_spans_total', { exporter: 'otlp' }), failed0 + 5,
      'hotspan_exporter_send_failed_spans_total{exporter="otlp"}');
  });
});
