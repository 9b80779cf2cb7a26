// The fault matrix (issue "Reliability"): the real binary between clients and sinks that fail.
// Each case counts what was sent against what arrived, by span id (and, on the profiles path,
// by a per-profile label): (a) backend down, then back; (b) 503, then 429, with Retry-After;
// (c) 400: dropped, counted, not retried; (d) a slow backend: the queue fills, receivers push
// back, the client retries, memory stays under the memory_limiter limit; (e) memory above the
// soft limit: everything refused with Retry-After, nothing half-delivered.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { startHotspan, SANITIZE } from './lib/hotspan.mjs';
import { startSink } from './lib/sink.mjs';
import { startPyroscopeSink, postPush, encodePushRequest } from './lib/pyroscope_sink.mjs';
import { encodeProfile } from './lib/pprof.mjs';
import { fetchMetrics, metric, metricSum } from './lib/metrics.mjs';
import { postProto } from './lib/http.mjs';
import * as otlp from './lib/otlp.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// ASan roughly triples resident memory; the limit is about hotspan, not the sanitizer
const LIMIT_MIB = SANITIZE ? 1024 : 256;

function config({ sink, pyro, limitMib = LIMIT_MIB, queueSize = 2, timeout = '5s' }) {
  return `receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:0
  pyroscope: {endpoint: 127.0.0.1:0}
processors:
  memory_limiter: {limit_mib: ${limitMib}, check_interval: 100ms}
  batch: {send_batch_size: 200, timeout: 50ms}
exporters:
  otlp:
    endpoint: http://127.0.0.1:${sink.port}
    timeout: ${timeout}
    sending_queue: {queue_size: ${queueSize}, num_consumers: 1}
    retry_on_failure: {initial_interval: 100ms, max_interval: 200ms, max_elapsed_time: 0}
  pyroscope:
    endpoint: http://127.0.0.1:${pyro.port}
    timeout: ${timeout}
    sending_queue: {queue_size: ${queueSize}, num_consumers: 1}
    retry_on_failure: {initial_interval: 100ms, max_interval: 200ms, max_elapsed_time: 0}
service:
  telemetry:
    admin: 127.0.0.1:0
    log_level: info
  pipelines:
    traces: {receivers: [otlp], processors: [memory_limiter, batch], exporters: [otlp]}
    profiles: {receivers: [pyroscope], processors: [memory_limiter], exporters: [pyroscope]}
`;
}

/** A client that honours backpressure: resends after Retry-After on 503/429 until answered
 * 200. Returns the refusals it saw ({status, retryAfter}). Fails on any other status. */
async function sendUntilAccepted(send, what, deadlineMs = 30000) {
  const refusals = [];
  const end = Date.now() + deadlineMs;
  for (;;) {
    const res = await send();
    if (res.status === 200) return refusals;
    if (res.status !== 503 && res.status !== 429) {
      assert.fail(`${what}: answered ${res.status}: ${res.body}`);
    }
    const ra = res.headers['retry-after'];
    assert.match(String(ra), /^\d+$/, `${what}: ${res.status} without a Retry-After in seconds`);
    refusals.push({ status: res.status, retryAfter: Number(ra) });
    assert.ok(Date.now() < end, `${what}: still refused after ${deadlineMs} ms`);
    await sleep(Number(ra) * 1000);
  }
}

/** Sends `requests` OTLP requests of `spans` spans each from `clients` concurrent clients;
 * returns {ids: span ids answered 200, refusals}. */
async function sendSpans(port, { clients, requests, spans, gapMs = 20, tag }) {
  const ids = [];
  const refusals = [];
  await Promise.all(Array.from({ length: clients }, async (_, c) => {
    for (let i = 0; i < requests; i += 1) {
      const batch = Array.from({ length: spans }, (__, k) =>
        otlp.makeSpan({ name: `${tag}-${c}-${i}-${k}` }));
      const body = otlp.encodeRequest(batch);
      refusals.push(...await sendUntilAccepted(() => postProto(port, body), `${tag} ${c}/${i}`));
      for (const s of batch) ids.push(s.spanId);
      await sleep(gapMs);
    }
  }));
  return { ids, refusals };
}

/** One profile per push, told apart by its `seq` label; returns the labels answered 200. */
async function sendProfiles(port, { count, tag }) {
  const raw = encodeProfile({ samples: [{ stack: ['main', 'work'], values: [1, 10000000] }] });
  const sent = [];
  const refusals = [];
  for (let i = 0; i < count; i += 1) {
    const seq = `${tag}-${i}`;
    const body = encodePushRequest([{
      labels: { __name__: 'process_cpu', service_name: 'it-faults', seq },
      samples: [{ raw }],
    }]);
    refusals.push(...await sendUntilAccepted(() => postPush(port, body), `profile ${seq}`));
    sent.push(seq);
  }
  return { sent, refusals };
}

const profileSeqs = (pyro, tag) => pyro.profiles('push')
  .map((p) => p.labels?.seq).filter((s) => s && s.startsWith(`${tag}-`));

/** Every id of `sent` arrived exactly once, nothing else with the tag. */
function assertExactlyOnce(sent, arrived, what) {
  const counts = new Map();
  for (const id of arrived) counts.set(id, (counts.get(id) || 0) + 1);
  const missing = sent.filter((id) => !counts.has(id));
  assert.deepEqual(missing.slice(0, 5), [], `${what}: ${missing.length} of ${sent.length} ` +
    'answered 200 but never delivered');
  const dup = [...counts].filter(([, n]) => n > 1);
  assert.deepEqual(dup.slice(0, 5), [], `${what}: ${dup.length} delivered more than once`);
  assert.equal(arrived.length, sent.length, `${what}: delivered vs sent`);
}

async function waitMetric(port, pred, timeoutMs = 5000) {
  let m;
  const end = Date.now() + timeoutMs;
  do {
    m = await fetchMetrics(port);
    if (pred(m)) return m;
    await sleep(50);
  } while (Date.now() < end);
  return m;
}

describe('faults (a)-(c): one hotspan, a backend that fails in three ways', () => {
  let sink;
  let pyro;
  let hs;

  before(async () => {
    sink = await startSink();
    pyro = await startPyroscopeSink();
    hs = await startHotspan(config({ sink, pyro }), { waitFor: ['otlp', 'pyroscope', 'admin'] });
  });

  after(async () => {
    if (hs) {
      const r = await hs.stop();
      assert.equal(r.code, 0, `exit code on SIGTERM\n${r.logs.slice(-30).join('\n')}`);
    }
    if (sink) await sink.stop();
    if (pyro) await pyro.stop();
  });

  it('(a) backend down for a while, then back: everything answered 200 is delivered once', async () => {
    await sink.down();
    await pyro.down({ close: true });
    const spans = sendSpans(hs.ports.otlp, { clients: 3, requests: 6, spans: 50, tag: 'a' });
    const profiles = sendProfiles(hs.ports.pyroscope, { count: 8, tag: 'a' });
    await sleep(2000); // down long enough for the queues (2 each) to fill
    await sink.up();
    await pyro.up();
    const s = await spans;
    const p = await profiles;
    assert.ok(s.refusals.length > 0, 'the span queue never filled while the backend was down');
    assert.ok(s.refusals.every((r) => r.status === 503), 'OTLP refuses with 503');
    assert.ok(p.refusals.every((r) => r.status === 429), 'the Pyroscope API refuses with 429');
    await sink.waitForSpans(s.ids.length, 20000);
    await pyro.waitForProfiles(p.sent.length, { timeoutMs: 20000, filter: (x) => x.labels?.seq?.startsWith('a-') });
    await sleep(300); // a duplicate (a retry of something delivered) would show up now
    assertExactlyOnce(s.ids, sink.spans().map((x) => x.span.spanId), 'spans');
    assertExactlyOnce(p.sent, profileSeqs(pyro, 'a'), 'profiles');
  });

  it('(b) 503 then 429 with Retry-After: waits as told, then delivers once', async () => {
    const fired = sink.requests.length;
    sink.respondWith({ status: 503, headers: { 'retry-after': '1' }, body: 'busy' }, 1);
    sink.respondWith({ status: 429, headers: { 'retry-after': '2' }, body: 'slow down' }, 1);
    pyro.respondWith({ status: 503, headers: { 'retry-after': '1' }, body: 'busy' }, 1);
    pyro.respondWith({ status: 429, headers: { 'retry-after': '1' }, body: 'slow down' }, 1);
    const pyroFired = pyro.requests.length;
    const [s, p] = await Promise.all([
      sendSpans(hs.ports.otlp, { clients: 1, requests: 1, spans: 10, tag: 'b' }),
      sendProfiles(hs.ports.pyroscope, { count: 1, tag: 'b' }),
    ]);
    const idSet = new Set(s.ids);
    await sink.waitFor(() => sink.spans().filter((x) => idSet.has(x.span.spanId)).length >= 10, 15000);
    await pyro.waitForProfiles(1, { timeoutMs: 15000, filter: (x) => x.labels?.seq === 'b-0' });
    const attempts = sink.requests.slice(fired);
    assert.deepEqual(attempts.map((r) => r.status), [503, 429, 200], 'span attempts');
    const pAttempts = pyro.requests.slice(pyroFired);
    assert.deepEqual(pAttempts.map((r) => r.status), [503, 429, 200], 'profile attempts');
    // Both clocks are in whole milliseconds (Date.now here, uv_now in hotspan): allow 5 ms.
    for (const [name, list, waits] of [['spans', attempts, [1000, 2000]],
      ['profiles', pAttempts, [1000, 1000]]]) {
      for (let i = 1; i < list.length; i += 1) {
        const gap = list[i].time - list[i - 1].time;
        assert.ok(gap >= waits[i - 1] - 5, `${name}: retry ${i} came ${gap} ms after a ` +
          `${list[i - 1].status} with Retry-After: ${waits[i - 1] / 1000}`);
      }
    }
    assert.equal(sink.spans().filter((x) => idSet.has(x.span.spanId)).length, 10, 'spans once');
    assert.deepEqual(profileSeqs(pyro, 'b'), ['b-0'], 'the profile once');
  });

  it('(c) 400: dropped as permanent_error, counted failed, never retried', async () => {
    const m0 = await fetchMetrics(hs.ports.admin);
    const failed0 = metric(m0, 'hotspan_exporter_send_failed_spans_total', { exporter: 'otlp' }) ?? 0;
    const pfailed0 = metric(m0, 'hotspan_exporter_send_failed_profiles_total', { exporter: 'pyroscope' }) ?? 0;
    const perm = (m) => Object.entries(m).filter(([k]) =>
      k.startsWith('hotspan_dropped_total{') && k.includes('reason="permanent_error"'))
      .reduce((a, [, v]) => a + v, 0);
    const perm0 = perm(m0);
    const fired = sink.requests.length;
    const pyroFired = pyro.requests.length;
    sink.respondWith({ status: 400, headers: { 'content-type': 'text/plain' }, body: 'bad' }, 1);
    pyro.respondWith({ status: 400, headers: { 'content-type': 'text/plain' }, body: 'bad' }, 1);
    const s = await sendSpans(hs.ports.otlp, { clients: 1, requests: 1, spans: 7, tag: 'c' });
    const p = await sendProfiles(hs.ports.pyroscope, { count: 1, tag: 'c' });
    assert.equal(s.refusals.length + p.refusals.length, 0, 'hotspan accepted both at once');
    await sink.waitFor(() => sink.requests.length > fired, 5000, () => 'no span request');
    await pyro.waitFor(() => pyro.requests.length > pyroFired, 5000, () => 'no profile request');
    await sleep(800); // retries would come within max_interval (200 ms)
    assert.deepEqual(sink.requests.slice(fired).map((r) => r.status), [400], 'spans: sent once');
    assert.deepEqual(pyro.requests.slice(pyroFired).map((r) => r.status), [400], 'profiles: sent once');
    const m = await waitMetric(hs.ports.admin, (x) => perm(x) >= perm0 + 8);
    assert.equal(metric(m, 'hotspan_exporter_send_failed_spans_total', { exporter: 'otlp' }),
      failed0 + 7, 'exporter_send_failed_spans_total');
    assert.equal(metric(m, 'hotspan_exporter_send_failed_profiles_total', { exporter: 'pyroscope' }),
      pfailed0 + 1, 'exporter_send_failed_profiles_total');
    assert.equal(perm(m), perm0 + 8, 'hotspan_dropped_total{reason="permanent_error"}: 7 spans + 1 profile');
    const ids = new Set(s.ids);
    assert.equal(sink.spans().filter((x) => ids.has(x.span.spanId)).length, 0, 'nothing accepted');
  });
});

describe('faults (d): a slow backend', () => {
  let sink;
  let pyro;
  let hs;

  before(async () => {
    sink = await startSink();
    pyro = await startPyroscopeSink();
    hs = await startHotspan(config({ sink, pyro }), { waitFor: ['otlp', 'pyroscope', 'admin'] });
  });

  after(async () => {
    if (hs) {
      const r = await hs.stop();
      assert.equal(r.code, 0, `exit code on SIGTERM\n${r.logs.slice(-30).join('\n')}`);
    }
    if (sink) await sink.stop();
    if (pyro) await pyro.stop();
  });

  it('pushes back with 503 + Retry-After, delivers all it took, stays under the limit', async (t) => {
    sink.setDelay(250);
    let peakRss = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const m = await fetchMetrics(hs.ports.admin);
        peakRss = Math.max(peakRss, metric(m, 'hotspan_process_resident_memory_bytes') ?? 0);
        await sleep(100);
      }
    })();
    const s = await sendSpans(hs.ports.otlp, { clients: 4, requests: 8, spans: 100, gapMs: 0, tag: 'd' });
    sink.setDelay(0);
    sampling = false;
    await sampler;
    assert.ok(s.refusals.length > 0, 'a backend 250 ms per batch with queue_size 2 never filled the queue');
    assert.ok(s.refusals.every((r) => r.status === 503 && r.retryAfter >= 1), '503 + Retry-After');
    await sink.waitForSpans(s.ids.length, 20000);
    await sleep(300);
    assertExactlyOnce(s.ids, sink.spans().map((x) => x.span.spanId), 'spans');
    const m = await fetchMetrics(hs.ports.admin);
    const refused = metric(m, 'hotspan_receiver_refused_spans_total', { receiver: 'otlp', transport: 'http' });
    assert.equal(refused, s.refusals.length * 100, 'every refusal counted by the receiver');
    const hwmKiB = Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${hs.proc.pid}/status`, 'utf8'))[1]);
    assert.ok(hwmKiB * 1024 < LIMIT_MIB * 1048576,
      `peak RSS (VmHWM) ${Math.round(hwmKiB / 1024)} MiB >= memory_limiter limit_mib ${LIMIT_MIB}`);
    assert.ok(peakRss > 0 && peakRss < LIMIT_MIB * 1048576, `/metrics RSS peaked at ${peakRss}`);
    t.diagnostic(`${s.ids.length} spans delivered, ${s.refusals.length} refusals (503), VmHWM ` +
      `${Math.round(hwmKiB / 1024)} MiB, limit_mib ${LIMIT_MIB}`);
    const labels = { processor: 'memory_limiter', pipeline: 'traces' };
    assert.equal(metric(m, 'hotspan_processor_memory_limiter_hard_limit_bytes', labels),
      LIMIT_MIB * 1048576, 'the limiter reports its hard limit');
    assert.ok(metric(m, 'hotspan_processor_memory_limiter_rss_bytes', labels) > 0,
      'the limiter reports its last reading');
  });
});

describe('faults (e): memory above the soft limit', () => {
  let sink;
  let pyro;
  let hs;

  before(async () => {
    sink = await startSink();
    pyro = await startPyroscopeSink();
    // 1 MiB: any process is above it, so the limiter refuses from the first request
    hs = await startHotspan(config({ sink, pyro, limitMib: 1 }),
      { waitFor: ['otlp', 'pyroscope', 'admin'] });
  });

  after(async () => {
    if (hs) {
      const r = await hs.stop();
      assert.equal(r.code, 0, `exit code on SIGTERM\n${r.logs.slice(-30).join('\n')}`);
    }
    if (sink) await sink.stop();
    if (pyro) await pyro.stop();
  });

  it('refuses spans with 503 and profiles with 429, both with Retry-After; delivers nothing', async () => {
    const spans = Array.from({ length: 5 }, () => otlp.makeSpan());
    const r1 = await postProto(hs.ports.otlp, otlp.encodeRequest(spans));
    assert.equal(r1.status, 503);
    assert.match(String(r1.headers['retry-after']), /^\d+$/);
    const r2 = await postPush(hs.ports.pyroscope, encodePushRequest([{
      labels: { __name__: 'process_cpu', service_name: 'it-faults', seq: 'e-0' },
      samples: [{ raw: encodeProfile({ samples: [{ stack: ['main'], values: [1, 1] }] }) }],
    }]));
    assert.equal(r2.status, 429);
    assert.match(String(r2.headers['retry-after']), /^\d+$/);
    await sleep(300);
    assert.equal(sink.requests.length, 0, 'nothing reached the span backend');
    assert.equal(pyro.requests.length, 0, 'nothing reached the profile backend');
    const m = await fetchMetrics(hs.ports.admin);
    assert.equal(metric(m, 'hotspan_receiver_refused_spans_total', { receiver: 'otlp', transport: 'http' }), 5);
    assert.equal(metricSum(m, 'hotspan_receiver_accepted_spans_total'), 0);
    for (const pipeline of ['traces', 'profiles']) {
      const labels = { processor: 'memory_limiter', pipeline };
      assert.ok(metric(m, 'hotspan_processor_memory_limiter_refused_total', labels) >= 1,
        `processor_memory_limiter_refused_total{pipeline="${pipeline}"}`);
      assert.ok(metric(m, 'hotspan_processor_memory_limiter_soft_limit_bytes', labels) < 1048576);
    }
    await hs.waitForLog(/above the soft limit/);
  });
});
