// /metrics and /healthz as an operator meets them: every metric family named in docs/metrics.md's
// table is made to move by driving the real binary (receivers, the correlator with a
// slow span and a profile, a batch processor, sinks that fail, a memory_limiter with a tiny
// limit, a persistent queue whose disk fails and a restart that replays it, a load_balancing
// exporter whose DNS answer changes), and the last test
// fails listing every documented family no test saw move. Constant gauges (a queue's capacity,
// the memory limits, build info) are checked against the configured value instead. Also
// /healthz/ready: 503 once an exporter has failed for longer than
// service.telemetry.health.exporter_failure_threshold, 200 again after the backend recovers,
// 503 again while shutting down, while /healthz/live stays 200 throughout.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';
import { startHotspan } from './lib/hotspan.mjs';
import { startSink } from './lib/sink.mjs';
import { startPyroscopeSink, postIngest } from './lib/pyroscope_sink.mjs';
import { encodeProfile } from './lib/pprof.mjs';
import { fetchMetrics, metric, metricSum } from './lib/metrics.mjs';
import { makeCerts } from './lib/tls.mjs';
import { postProto, request } from './lib/http.mjs';
import * as otlp from './lib/otlp.mjs';
import { hostsFile, sharedPorts } from './lib/netns.mjs';

// The Metrics table: every `| \`hotspan_...` row of docs/metrics.md.
const METRICS_DOC = new URL('../../docs/metrics.md', import.meta.url).pathname;
// Families whose cause is a unit's business, or needs a setup of its own (a JetStream
// cluster), asserted where that is tested; this file checks that test still names the family
// (the pattern; by default the family's name).
const ASSERTED_ELSEWHERE = {
  hotspan_correlator_ui_truncated_total: ['../unit/test_correlator_ui.c', /ui\.cut|ui_truncated/],
  hotspan_nats_connected: ['./nats.test.mjs'],
  hotspan_nats_reconnects_total: ['./nats.test.mjs'],
  hotspan_exporter_nats_duplicates_total: ['./nats.test.mjs'],
  hotspan_receiver_nats_messages_total: ['./nats.test.mjs'],
  hotspan_receiver_nats_redelivered_total: ['./nats.test.mjs'],
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The metric names of the table: the first backticked name of each `| \`hotspan_...` row. */
function documentedMetrics() {
  const names = [];
  for (const line of readFileSync(METRICS_DOC, 'utf8').split('\n')) {
    const m = /^\| `(hotspan_[a-z0-9_]+)`/.exec(line);
    if (m) names.push(m[1]);
  }
  return names;
}

const seen = new Set();
/** Records that `name` was seen to change (or to hold its configured value). */
function saw(name) { seen.add(name); }

/** Asserts that `name` (summed over its series, or the one series of `labels`) went up. */
function assertRose(before, now, name, labels = null) {
  const get = (m) => (labels ? metric(m, name, labels) ?? 0 : metricSum(m, name));
  assert.ok(get(now) > get(before), `${name}${labels ? JSON.stringify(labels) : ''} did not rise: ` +
    `${get(before)} -> ${get(now)}`);
  saw(name);
}

/** Polls /metrics until pred(m) holds; returns m. */
async function waitMetrics(port, pred, what, timeoutMs = 15000) {
  const end = Date.now() + timeoutMs;
  let m;
  for (;;) {
    m = await fetchMetrics(port);
    if (pred(m)) return m;
    if (Date.now() > end) {
      // the whole scrape goes to stderr: an assertion message this long would be cut
      console.error(Object.entries(m).map(([k, v]) => `${k} ${v}`).join('\n'));
      throw new Error(`timed out waiting for ${what} (the last scrape is on stderr)`);
    }
    await sleep(50);
  }
}

const nowS = () => Math.floor(Date.now() / 1000);

/** POST /ingest a small CPU profile of `service` covering [from, until] seconds. */
function ingest(port, service, { from = nowS() - 20, until = nowS() - 10, tenant = null } = {}) {
  const body = encodeProfile({
    samples: [
      { stack: ['main', 'handle', 'findByEmail'], values: [5, 50000000] },
      { stack: ['main', 'handle', 'findByEmail', 'loadPreferences'], values: [3, 30000000] },
    ],
    timeNanos: BigInt(from) * 1000000000n,
    durationNanos: BigInt(until - from) * 1000000000n,
  });
  return postIngest(port, {
    query: { name: `${service}.cpu{service_name=${service},env=it}`, from: String(from), until: String(until),
      format: 'pprof', spyName: 'gospy', sampleRate: '100' },
    body,
    headers: tenant ? { 'X-Scope-OrgID': tenant } : {},
  });
}

/** POST spans of `service`; resolves the response. */
function sendSpans(port, spans, service = 'it-service', tenant = null) {
  return postProto(port, otlp.encodeRequest(spans, { resource: otlp.defaultResource(service) }),
    tenant ? { 'X-Scope-OrgID': tenant } : {});
}

const cleanups = [];
after(async () => { for (const c of cleanups.reverse()) await c(); });

async function hotspan(yaml, opts) {
  const hs = await startHotspan(yaml, opts);
  cleanups.push(async () => { await hs.stop().catch(() => {}); });
  return hs;
}

async function stopOk(hs) {
  const r = await hs.stop();
  assert.equal(r.code, 0, `exit code on SIGTERM\n${r.logs.slice(-30).join('\n')}`);
}

describe('/metrics: every documented family moves', () => {
  it('receivers, batch, correlator, exporters and the process', async () => {
    const sink = await startSink();
    const psink = await startPyroscopeSink();
    cleanups.push(() => sink.stop(), () => psink.stop());
    const hs = await hotspan(`receivers:
  otlp: {protocols: {http: {endpoint: 127.0.0.1:0}}}
  pyroscope: {endpoint: 127.0.0.1:0}
processors:
  correlator:
    slow: {threshold: 300ms}
    max_wait: 1500ms
    max_wait_cap: 3s
    first_profile_wait: 20s
    limits: {max_services: 1}
  batch: {send_batch_size: 2, timeout: 100ms}
exporters:
  otlp:
    endpoint: ${sink.url}
    sending_queue: {queue_size: 77, num_consumers: 1}
  pyroscope:
    endpoint: ${psink.url}
service:
  telemetry: {admin: 127.0.0.1:0}
  pipelines:
    traces: {receivers: [otlp], processors: [correlator, batch], exporters: [otlp]}
    profiles: {receivers: [pyroscope], processors: [correlator], exporters: [pyroscope]}
`, { waitFor: ['otlp', 'pyroscope', 'admin'] });
    const admin = hs.ports.admin;
    const m0 = await fetchMetrics(admin);

    // constants: the queue's capacity as configured, build info
    assert.equal(metric(m0, 'hotspan_exporter_queue_capacity', { exporter: 'otlp' }), 77);
    saw('hotspan_exporter_queue_capacity');
    const build = Object.keys(m0).find((k) => k.startsWith('hotspan_build_info{'));
    assert.match(build || '', /version="\d+\.\d+\.\d+[^"]*"/);
    assert.equal(m0[build], 1);
    saw('hotspan_build_info');

    // fast spans through the batch processor: one full batch (size), one left for the timer
    let res = await sendSpans(hs.ports.otlp, [otlp.makeSpan(), otlp.makeSpan(), otlp.makeSpan()]);
    assert.equal(res.status, 200);
    await sink.waitForSpans(3);
    // invalid ids: partial success; garbage: a 400
    res = await sendSpans(hs.ports.otlp, [otlp.makeSpan({ traceId: '00'.repeat(16) })]);
    assert.equal(res.status, 200);
    res = await postProto(hs.ports.otlp, Buffer.from([0x0a, 0xff, 0xff, 0x01]));
    assert.equal(res.status, 400);
    // a profile of svc-a, ending 10 s ago
    res = await ingest(hs.ports.pyroscope, 'svc-a', { tenant: 'it' });
    assert.equal(res.status, 200, `ingest: ${res.body}`);
    await psink.waitForProfiles(1);
    // a slow span of svc-a ending now: its profile window is not complete, so it is parked
    const slowEnd = BigInt(Date.now()) * 1000000n;
    const slow = otlp.makeSpan({ name: 'UserRepository.findByEmail',
      startTimeUnixNano: String(slowEnd - 800000000n), endTimeUnixNano: String(slowEnd) });
    res = await sendSpans(hs.ports.otlp, [slow], 'svc-a', 'it');
    assert.equal(res.status, 200);
    const m1 = await waitMetrics(admin,
      (m) => metricSum(m, 'hotspan_correlator_parked_spans') > 0, 'a parked span');
    saw('hotspan_correlator_parked_spans');
    // ... and released when its wait ends, annotated: svc-a uploads every 10 s (what its profile
    // covers), so the span waits past max_wait for the upload due to cover it, until
    // max_wait_cap ends the wait
    const m2 = await waitMetrics(admin,
      (m) => metricSum(m, 'hotspan_correlator_released_by_timeout_total') > 0 &&
        metricSum(m, 'hotspan_correlator_parked_spans') === 0, 'the parked span released');
    assertRose(m0, m2, 'hotspan_correlator_extended_waits_total', { processor: 'correlator', outcome: 'capped' });
    await sink.waitFor(() => sink.spans().some((s) => s.span.spanId === slow.spanId), 10000);
    // a profile of a second service: max_services 1 evicts the first
    res = await ingest(hs.ports.pyroscope, 'svc-b', { tenant: 'it' });
    assert.equal(res.status, 200);
    const m3 = await waitMetrics(admin,
      (m) => metric(m, 'hotspan_correlator_evictions_total', { processor: 'correlator', what: 'service' }) > 0 &&
        metricSum(m, 'hotspan_exporter_sent_profiles_total') >= 2 &&
        metric(m, 'hotspan_processor_batch_batches_total',
          { processor: 'batch', pipeline: 'traces', trigger: 'timeout' }) >= 1,
      'a service evicted, two profiles sent, a batch sent by its timeout');

    // a slow span of a service that has sent no profile yet (cold start): parked until its
    // first profile comes, then annotated from it
    const coldEnd = BigInt(Date.now()) * 1000000n;
    const cold = otlp.makeSpan({ name: 'UserRepository.findByEmail',
      startTimeUnixNano: String(coldEnd - 800000000n), endTimeUnixNano: String(coldEnd) });
    res = await sendSpans(hs.ports.otlp, [cold], 'svc-c', 'it');
    assert.equal(res.status, 200);
    await waitMetrics(admin, (m) => metricSum(m, 'hotspan_correlator_parked_spans') > 0,
      'the cold-start span parked');
    res = await ingest(hs.ports.pyroscope, 'svc-c', { tenant: 'it', from: nowS() - 5, until: nowS() + 10 });
    assert.equal(res.status, 200, `ingest: ${res.body}`);
    const m4 = await waitMetrics(admin, (m) => metric(m, 'hotspan_correlator_cold_start_total',
      { processor: 'correlator', outcome: 'matched' }) > 0, 'the cold-start span matched');
    assertRose(m0, m4, 'hotspan_correlator_cold_start_total', { processor: 'correlator', outcome: 'matched' });
    await sink.waitFor(() => sink.spans().some((s) => s.span.spanId === cold.spanId), 10000);

    for (const name of ['hotspan_receiver_accepted_spans_total', 'hotspan_receiver_rejected_spans_total',
      'hotspan_receiver_failed_requests_total', 'hotspan_receiver_accepted_profiles_total',
      'hotspan_processor_batch_sent_spans_total', 'hotspan_correlator_spans_checked_total',
      'hotspan_correlator_slow_spans_total', 'hotspan_correlator_annotated_spans_total',
      'hotspan_correlator_released_by_timeout_total', 'hotspan_correlator_profiles_indexed_total',
      'hotspan_correlator_evictions_total', 'hotspan_correlator_index_bytes',
      'hotspan_exporter_sent_spans_total', 'hotspan_exporter_sent_profiles_total',
      'hotspan_process_cpu_seconds_total', 'hotspan_process_uptime_seconds']) {
      assertRose(m0, m3, name);
    }
    assert.ok(metric(m3, 'hotspan_receiver_failed_requests_total',
      { receiver: 'otlp', transport: 'http', reason: 'malformed' }) >= 1);
    assertRose(m0, m3, 'hotspan_processor_batch_batches_total',
      { processor: 'batch', pipeline: 'traces', trigger: 'size' });
    assertRose(m0, m3, 'hotspan_processor_batch_batches_total',
      { processor: 'batch', pipeline: 'traces', trigger: 'timeout' });
    if (m2['hotspan_correlator_ui_bytes{processor="correlator"}'] !== undefined) {
      assertRose(m0, m2, 'hotspan_correlator_ui_bytes');
    }
    assert.ok(m1);
    // the process: memory and descriptors are read at scrape time
    assert.ok(m3.hotspan_process_resident_memory_bytes > 1 << 20);
    saw('hotspan_process_resident_memory_bytes');
    assert.ok(m3.hotspan_process_open_fds >= 3, 'open fds');
    saw('hotspan_process_open_fds');
    assert.ok(m3.hotspan_process_max_fds >= m3.hotspan_process_open_fds, 'max fds');
    saw('hotspan_process_max_fds');
    await stopOk(hs);
  });

  it('failing backends: retries, failures, drops, the failing time and the queue', async () => {
    const sink = await startSink();
    const psink = await startPyroscopeSink();
    cleanups.push(() => sink.stop(), () => psink.stop());
    const hs = await hotspan(`receivers:
  otlp: {protocols: {http: {endpoint: 127.0.0.1:0}}}
  pyroscope: {endpoint: 127.0.0.1:0}
exporters:
  otlp:
    endpoint: ${sink.url}
    sending_queue: {num_consumers: 1}
    retry_on_failure: {initial_interval: 50ms, max_interval: 100ms, max_elapsed_time: 0}
  pyroscope:
    endpoint: ${psink.url}
    retry_on_failure: {initial_interval: 50ms, max_interval: 100ms}
service:
  telemetry: {admin: 127.0.0.1:0}
  pipelines:
    traces: {receivers: [otlp], exporters: [otlp]}
    profiles: {receivers: [pyroscope], exporters: [pyroscope]}
`, { waitFor: ['otlp', 'pyroscope', 'admin'] });
    const admin = hs.ports.admin;
    const m0 = await fetchMetrics(admin);

    // 503 twice, then accepted: two retries, and the failing time back to 0 after the success
    sink.respondWith({ status: 503 }, 2);
    const a = otlp.makeSpan();
    assert.equal((await sendSpans(hs.ports.otlp, [a])).status, 200);
    await sink.waitFor(() => sink.spans().some((s) => s.span.spanId === a.spanId));
    let m = await waitMetrics(admin, (x) => metricSum(x, 'hotspan_exporter_retries_total') >= 2,
      'two retries');
    assertRose(m0, m, 'hotspan_exporter_retries_total', { exporter: 'otlp' });

    // 400: dropped, counted as failed, by reason
    sink.respondWith({ status: 400, body: 'bad' }, 1);
    assert.equal((await sendSpans(hs.ports.otlp, [otlp.makeSpan(), otlp.makeSpan()])).status, 200);
    psink.respondWith({ status: 400, body: 'bad' }, 1);
    assert.equal((await ingest(hs.ports.pyroscope, 'svc-a')).status, 200);
    m = await waitMetrics(admin, (x) =>
      metricSum(x, 'hotspan_exporter_send_failed_spans_total') >= 2 &&
      metricSum(x, 'hotspan_exporter_send_failed_profiles_total') >= 1, 'failed spans and profiles');
    assertRose(m0, m, 'hotspan_exporter_send_failed_spans_total', { exporter: 'otlp' });
    assertRose(m0, m, 'hotspan_exporter_send_failed_profiles_total', { exporter: 'pyroscope' });
    assertRose(m0, m, 'hotspan_dropped_total', { component: 'otlp', reason: 'permanent_error' });

    // the backend goes away: the batch stays held (queue size and bytes), failing time grows
    await sink.down();
    const held = otlp.makeSpan();
    assert.equal((await sendSpans(hs.ports.otlp, [held])).status, 200);
    const mDown = await waitMetrics(admin, (x) =>
      metric(x, 'hotspan_exporter_failing_seconds', { exporter: 'otlp' }) > 0.2 &&
      metric(x, 'hotspan_exporter_queue_size', { exporter: 'otlp' }) >= 1, 'a failing exporter');
    assertRose(m0, mDown, 'hotspan_exporter_failing_seconds', { exporter: 'otlp' });
    assertRose(m0, mDown, 'hotspan_exporter_queue_size', { exporter: 'otlp' });
    assertRose(m0, mDown, 'hotspan_exporter_queue_bytes', { exporter: 'otlp' });
    await sink.up();
    await sink.waitFor(() => sink.spans().some((s) => s.span.spanId === held.spanId), 10000);
    const mUp = await waitMetrics(admin, (x) =>
      metric(x, 'hotspan_exporter_failing_seconds', { exporter: 'otlp' }) === 0 &&
      metric(x, 'hotspan_exporter_queue_size', { exporter: 'otlp' }) === 0, 'the exporter recovered');
    assert.equal(metric(mUp, 'hotspan_exporter_queue_bytes', { exporter: 'otlp' }), 0);
    await stopOk(hs);
  });

  it('a persistent queue: on disk while the backend is down, a failing disk, replay after a restart',
    async () => {
      const sink = await startSink();
      const psink = await startPyroscopeSink();
      cleanups.push(() => sink.stop(), () => psink.stop());
      const dir = mkdtempSync(join(tmpdir(), 'hotspan-metrics-'));
      cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
      const flag = join(dir, 'fail-store');
      await sink.down();
      await psink.down();
      const yaml = `receivers:
  otlp: {protocols: {http: {endpoint: 127.0.0.1:0}}}
  pyroscope: {endpoint: 127.0.0.1:0}
exporters:
  otlp:
    endpoint: ${sink.url}
    sending_queue: {storage: ${join(dir, 'queue')}}
    retry_on_failure: {initial_interval: 50ms, max_interval: 100ms, max_elapsed_time: 0}
  pyroscope:
    endpoint: ${psink.url}
    sending_queue: {storage: ${join(dir, 'queue')}}
    retry_on_failure: {initial_interval: 50ms, max_interval: 100ms, max_elapsed_time: 0}
service:
  telemetry: {admin: 127.0.0.1:0}
  pipelines:
    traces: {receivers: [otlp], exporters: [otlp]}
    profiles: {receivers: [pyroscope], exporters: [pyroscope]}
`;
      const env = { HOTSPAN_TEST_QUEUE_STORE_FAIL: flag };
      let hs = await hotspan(yaml, { env, waitFor: ['otlp', 'pyroscope', 'admin'] });
      const m0 = await fetchMetrics(hs.ports.admin);
      const kept = [otlp.makeSpan(), otlp.makeSpan()];
      assert.equal((await sendSpans(hs.ports.otlp, kept)).status, 200);
      assert.equal((await ingest(hs.ports.pyroscope, 'svc-a')).status, 200);
      let m = await waitMetrics(hs.ports.admin, (x) =>
        metric(x, 'hotspan_exporter_storage_batches', { exporter: 'otlp' }) >= 1 &&
        metric(x, 'hotspan_exporter_storage_batches', { exporter: 'pyroscope' }) >= 1, 'batches on disk');
      assertRose(m0, m, 'hotspan_exporter_storage_batches', { exporter: 'otlp' });
      assertRose(m0, m, 'hotspan_exporter_storage_bytes', { exporter: 'otlp' });

      // the disk fails: new batches are refused (503 to the client), counted at the queue
      writeFileSync(flag, '');
      const refused = await sendSpans(hs.ports.otlp, [otlp.makeSpan()]);
      assert.equal(refused.status, 503);
      const refusedProfile = await ingest(hs.ports.pyroscope, 'svc-a');
      assert.ok([429, 503].includes(refusedProfile.status), `ingest answered ${refusedProfile.status}`);
      m = await fetchMetrics(hs.ports.admin);
      assertRose(m0, m, 'hotspan_exporter_enqueue_failed_spans_total', { exporter: 'otlp' });
      assertRose(m0, m, 'hotspan_exporter_enqueue_failed_profiles_total', { exporter: 'pyroscope' });
      assertRose(m0, m, 'hotspan_exporter_storage_errors_total', { exporter: 'otlp', op: 'write' });
      assertRose(m0, m, 'hotspan_receiver_refused_spans_total', { receiver: 'otlp', transport: 'http' });
      rmSync(flag);
      await stopOk(hs);

      // restart with the backends up: what was on disk is sent, counted as replayed
      await sink.up();
      await psink.up();
      hs = await hotspan(yaml, { env, waitFor: ['otlp', 'pyroscope', 'admin'] });
      await sink.waitForSpans(2);
      m = await waitMetrics(hs.ports.admin, (x) =>
        metricSum(x, 'hotspan_exporter_replayed_spans_total') >= 2 &&
        metricSum(x, 'hotspan_exporter_replayed_profiles_total') >= 1, 'replayed batches');
      assertRose(m0, m, 'hotspan_exporter_replayed_spans_total', { exporter: 'otlp' });
      assertRose(m0, m, 'hotspan_exporter_replayed_profiles_total', { exporter: 'pyroscope' });
      await stopOk(hs);
    });

  it('a memory_limiter below the process size refuses spans and profiles', async () => {
    const sink = await startSink();
    const psink = await startPyroscopeSink();
    cleanups.push(() => sink.stop(), () => psink.stop());
    const hs = await hotspan(`receivers:
  otlp: {protocols: {http: {endpoint: 127.0.0.1:0}}}
  pyroscope: {endpoint: 127.0.0.1:0}
processors:
  memory_limiter: {limit_mib: 1, check_interval: 50ms}
exporters:
  otlp: {endpoint: ${sink.url}}
  pyroscope: {endpoint: ${psink.url}}
service:
  telemetry: {admin: 127.0.0.1:0}
  pipelines:
    traces: {receivers: [otlp], processors: [memory_limiter], exporters: [otlp]}
    profiles: {receivers: [pyroscope], processors: [memory_limiter], exporters: [pyroscope]}
`, { waitFor: ['otlp', 'pyroscope', 'admin'] });
    const admin = hs.ports.admin;
    const m0 = await fetchMetrics(admin);
    const labels = { processor: 'memory_limiter', pipeline: 'traces' };
    // the limits as configured: hard 1 MiB, soft 20% below it
    assert.equal(metric(m0, 'hotspan_processor_memory_limiter_hard_limit_bytes', labels), 1048576);
    saw('hotspan_processor_memory_limiter_hard_limit_bytes');
    assert.equal(metric(m0, 'hotspan_processor_memory_limiter_soft_limit_bytes', labels),
      1048576 - Math.floor(1048576 / 5));
    saw('hotspan_processor_memory_limiter_soft_limit_bytes');
    assert.ok(metric(m0, 'hotspan_processor_memory_limiter_rss_bytes', labels) > 1048576);
    saw('hotspan_processor_memory_limiter_rss_bytes');
    assert.equal(metric(m0, 'hotspan_processor_memory_limiter_refusing', labels), 1);
    saw('hotspan_processor_memory_limiter_refusing');

    const res = await sendSpans(hs.ports.otlp, [otlp.makeSpan()]);
    assert.equal(res.status, 503);
    const pres = await ingest(hs.ports.pyroscope, 'svc-a');
    assert.ok([429, 503].includes(pres.status), `ingest answered ${pres.status}`);
    const m = await waitMetrics(admin,
      (x) => metricSum(x, 'hotspan_processor_memory_limiter_trims_total') > 0, 'a trim');
    assertRose(m0, m, 'hotspan_processor_memory_limiter_refused_total', labels);
    assertRose(m0, m, 'hotspan_receiver_refused_spans_total', { receiver: 'otlp', transport: 'http' });
    assertRose(m0, m, 'hotspan_receiver_refused_profiles_total');
    assertRose({}, m, 'hotspan_processor_memory_limiter_trims_total');
    assert.equal(sink.requests.length, 0, 'nothing got past the limiter');
    await stopOk(hs);
  });

  it('refused credentials and refused TLS handshakes', async () => {
    const certs = makeCerts();
    cleanups.push(() => certs.cleanup());
    const sink = await startSink();
    cleanups.push(() => sink.stop());
    const hs = await hotspan(`receivers:
  otlp:
    protocols: {http: {endpoint: 127.0.0.1:0}}
    auth: {bearer_token: {token: right-token}}
  otlp/tls:
    protocols: {http: {endpoint: 127.0.0.1:0, tls: {cert_file: ${certs.server}, key_file: ${certs.serverKey}}}}
  otlp/one:
    protocols: {http: {endpoint: 127.0.0.1:0, max_connections: 1}}
exporters:
  otlp: {endpoint: http://127.0.0.1:${sink.port}}
service:
  telemetry: {admin: 127.0.0.1:0}
  pipelines:
    traces: {receivers: [otlp, otlp/tls, otlp/one], exporters: [otlp]}
`, { waitFor: ['otlp', 'otlp/tls', 'otlp/one', 'admin'] });
    const m0 = await fetchMetrics(hs.ports.admin);
    const r = await sendSpans(hs.ports.otlp, [otlp.makeSpan()]);
    assert.equal(r.status, 401);
    const plain = await request({ port: hs.ports['otlp/tls'], method: 'POST', path: '/v1/traces', body: 'x' });
    assert.equal(plain.status, 400);
    const m = await fetchMetrics(hs.ports.admin);
    assertRose(m0, m, 'hotspan_receiver_auth_failures_total', { receiver: 'otlp', reason: 'missing' });
    assertRose(m0, m, 'hotspan_http_tls_handshake_failures_total', { server: 'otlp/tls', reason: 'plaintext' });
    assertRose(m0, m, 'hotspan_http_server_responses_total', { server: 'otlp', code_class: '4xx' });

    // otlp/one holds one connection: while it is open the gauge says so; a second (from another
    // address: one address may hold only half of max_connections) takes the slot of the first,
    // which is idle; a third, while the second has begun a request, is refused
    const one = (from) => net.connect({ port: hs.ports['otlp/one'], host: '127.0.0.1', localAddress: from });
    const first = one('127.0.0.1');
    await new Promise((r) => first.on('connect', r));
    await waitMetrics(hs.ports.admin,
      (m) => metric(m, 'hotspan_http_server_connections_open', { server: 'otlp/one' }) === 1,
      'the first connection counted open');
    saw('hotspan_http_server_connections_open');
    const firstClosed = new Promise((r) => first.on('close', r).on('error', () => {}));
    const second = one('127.0.0.2');
    second.write('POST /v1/traces HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n');
    await new Promise((r) => second.once('data', r)); // the 100: the server is in its request
    await firstClosed;
    const third = one('127.0.0.3');
    await new Promise((r) => third.on('close', r).on('error', () => {}));
    second.destroy();
    const m2 = await fetchMetrics(hs.ports.admin);
    assertRose(m0, m2, 'hotspan_http_server_connections_reclaimed_total', { server: 'otlp/one' });
    assertRose(m0, m2, 'hotspan_http_server_connections_refused_total', { server: 'otlp/one', reason: 'max_connections' });
    await stopOk(hs);
  });

  it('a span naming another tenant than its token\'s', async () => {
    const sink = await startSink();
    cleanups.push(() => sink.stop());
    const hs = await hotspan(`receivers:
  otlp:
    protocols: {http: {endpoint: 127.0.0.1:0}}
    auth: {tenants: {a: token-a, b: token-b}}
processors:
  correlator: {labels: {trace_tenant: tenant.id}}
exporters:
  otlp: {endpoint: http://127.0.0.1:${sink.port}}
service:
  telemetry: {admin: 127.0.0.1:0}
  pipelines:
    traces: {receivers: [otlp], processors: [correlator], exporters: [otlp]}
`);
    const m0 = await fetchMetrics(hs.ports.admin);
    const resource = { attributes: [...otlp.defaultResource('svc').attributes,
      { key: 'tenant.id', value: { stringValue: 'a' } }] };
    const r = await postProto(hs.ports.otlp, otlp.encodeRequest([otlp.makeSpan()], { resource }),
      { authorization: 'Bearer token-b' });
    assert.equal(r.status, 200);
    const m = await fetchMetrics(hs.ports.admin);
    assertRose(m0, m, 'hotspan_correlator_tenant_mismatch_total', { processor: 'correlator' });
    await stopOk(hs);
  });

  it('load_balancing: backends, keys, a full backend refusing, a DNS change moving keys and a queue',
    async () => {
      // backends on 127.0.0.20 and .21 with the same port, named by lb.hotspan.test in a hosts
      // file the exporter sees as /etc/hosts
      const [port, pyroPort] = await sharedPorts(['127.0.0.20', '127.0.0.21'], 2);
      const a = await startSink({ host: '127.0.0.20', port });
      const b = await startSink({ host: '127.0.0.21', port });
      cleanups.push(() => a.stop(), () => b.stop());
      const hosts = hostsFile('lb.hotspan.test', ['127.0.0.20']);
      const hs = await hotspan(`receivers:
  otlp: {protocols: {http: {endpoint: 127.0.0.1:0}}}
exporters:
  load_balancing:
    resolver: {dns: {hostname: lb.hotspan.test, interval: 50ms}}
    protocol:
      otlp:
        port: ${port}
        compression: none
        retry_on_failure: {initial_interval: 20ms, max_interval: 50ms}
        sending_queue: {num_consumers: 1, queue_size: 2}
      pyroscope: {port: ${pyroPort}}
service:
  telemetry: {admin: 127.0.0.1:0}
  pipelines:
    traces: {receivers: [otlp], exporters: [load_balancing]}
`, { hosts: hosts.path });
      await hs.waitForLog(/1 backends \(1 joined/);
      const m0 = await fetchMetrics(hs.ports.admin);
      const ex = { exporter: 'load_balancing' };
      assert.equal(metric(m0, 'hotspan_load_balancing_backends', ex), 1);
      saw('hotspan_load_balancing_backends');
      for (let i = 0; i < 4; i++) {
        assert.equal((await sendSpans(hs.ports.otlp, [otlp.makeSpan()], `lb-svc-${i}`)).status, 200);
      }
      await a.waitForSpans(4);
      const m1 = await waitMetrics(hs.ports.admin, (m) => metric(m, 'hotspan_load_balancing_keys', ex) === 4,
        'four routing keys');
      assertRose(m0, m1, 'hotspan_load_balancing_keys');
      // the backend fails: its queue (2 batches) fills, then its keys are refused
      a.respondWith({ status: 503 }, 100000);
      const held = { exporter: 'load_balancing', backend: '127.0.0.20', signal: 'traces' };
      for (let i = 0; i < 2; i++) {
        assert.equal((await sendSpans(hs.ports.otlp, [otlp.makeSpan()], 'lb-svc-0')).status, 200);
      }
      assert.equal((await sendSpans(hs.ports.otlp, [otlp.makeSpan()], 'lb-svc-0')).status, 503);
      const m2 = await fetchMetrics(hs.ports.admin);
      assertRose(m1, m2, 'hotspan_load_balancing_refused_total', held);
      assert.equal(metric(m2, 'hotspan_exporter_queue_size', held), 2);
      // the answer changes: every key moves, and the held batches go with them
      hosts.set(['127.0.0.21']);
      await b.waitForSpans(2);
      const m3 = await waitMetrics(hs.ports.admin,
        (m) => metric(m, 'hotspan_load_balancing_rerouted_total', held) === 2, 'the queue re-routed');
      assertRose(m2, m3, 'hotspan_load_balancing_rerouted_total', held);
      assertRose(m2, m3, 'hotspan_load_balancing_ring_changes_total', ex);
      assertRose(m2, m3, 'hotspan_load_balancing_keys_moved_total', ex);
      assert.equal(metric(m3, 'hotspan_load_balancing_keys_moved_total', ex), 4);
      await stopOk(hs);
    });

  it('every family in the docs/metrics.md table was seen to move', () => {
    for (const [name, [file, pattern = new RegExp(`'${name}'`)]] of Object.entries(ASSERTED_ELSEWHERE)) {
      assert.match(readFileSync(new URL(file, import.meta.url), 'utf8'), pattern,
        `${name}: ${file} no longer asserts it`);
      saw(name);
    }
    const documented = documentedMetrics();
    assert.ok(documented.length >= 40, `only ${documented.length} rows read from ${METRICS_DOC}`);
    const missing = documented.filter((n) => !seen.has(n));
    assert.deepEqual(missing, [], `documented in ${METRICS_DOC} but not seen to change by a test:\n  ` +
      missing.join('\n  '));
  });
});

describe('/healthz/ready and /healthz/live', () => {
  it('ready turns 503 naming the exporter after the threshold, and 200 after recovery', async () => {
    const sink = await startSink();
    cleanups.push(() => sink.stop());
    const hs = await hotspan(`receivers:
  otlp: {protocols: {http: {endpoint: 127.0.0.1:0}}}
exporters:
  otlp/tempo:
    endpoint: ${sink.url}
    retry_on_failure: {initial_interval: 50ms, max_interval: 100ms, max_elapsed_time: 0}
service:
  telemetry:
    admin: 127.0.0.1:0
    health: {exporter_failure_threshold: 1s}
  pipelines:
    traces: {receivers: [otlp], exporters: [otlp/tempo]}
`);
    const get = async (path) => {
      const r = await request({ port: hs.ports.admin, method: 'GET', path });
      return { status: r.status, json: JSON.parse(r.body.toString('utf8')) };
    };
    let r = await get('/healthz/ready');
    assert.equal(r.status, 200);
    assert.equal(r.json.status, 'ok');
    assert.equal((await get('/healthz')).status, 200);

    await sink.down();
    const before = Date.now();
    const span = otlp.makeSpan();
    assert.equal((await sendSpans(hs.ports.otlp, [span])).status, 200);
    // failing, but not yet for the threshold: still ready, the exporter listed as failing
    r = await get('/healthz/ready');
    for (let i = 0; i < 100 && r.json.failing_exporters.length === 0; i++) {
      await sleep(20);
      r = await get('/healthz/ready');
    }
    if (Date.now() - before < 900) {
      assert.equal(r.status, 200, JSON.stringify(r.json));
      assert.equal(r.json.failing_exporters[0].over_threshold, false);
    }
    // past the threshold: 503, the body names the exporter and since when
    for (let i = 0; i < 200 && r.status === 200; i++) {
      await sleep(50);
      r = await get('/healthz/ready');
    }
    assert.equal(r.status, 503, JSON.stringify(r.json));
    assert.ok(Date.now() - before >= 1000, 'unready before the threshold');
    assert.equal(r.json.status, 'exporter failing');
    const f = r.json.failing_exporters.find((x) => x.exporter === 'otlp/tempo');
    assert.ok(f, JSON.stringify(r.json));
    assert.equal(f.over_threshold, true);
    assert.ok(f.seconds >= 1, `seconds ${f.seconds}`);
    assert.ok(Math.abs(Date.parse(f.since) - before) < 5000, `since ${f.since}`);
    assert.match(f.last_error, /\S/);
    assert.equal((await get('/healthz')).status, 503, '/healthz follows readiness');
    const live = await get('/healthz/live');
    assert.equal(live.status, 200, 'live while the backend is down');

    // the backend is back: the retried batch gets through and readiness returns
    await sink.up();
    await sink.waitFor(() => sink.spans().some((s) => s.span.spanId === span.spanId), 10000);
    for (let i = 0; i < 100 && r.status !== 200; i++) {
      await sleep(50);
      r = await get('/healthz/ready');
    }
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.deepEqual(r.json.failing_exporters, []);

    // shutting down: while the drain waits for the backend, not ready but live
    await sink.down();
    const last = otlp.makeSpan();
    assert.equal((await sendSpans(hs.ports.otlp, [last])).status, 200);
    hs.proc.kill('SIGTERM');
    await hs.waitForLog(/shutting down/);
    r = await get('/healthz/ready');
    assert.equal(r.status, 503, JSON.stringify(r.json));
    assert.equal(r.json.status, 'shutting down');
    assert.equal((await get('/healthz/live')).status, 200, 'live while draining');
    await sink.up();
    const exit = await hs.waitExit(20000);
    assert.deepEqual(exit, { code: 0, signal: null }, 'the drain ends once the backend is back');
    assert.ok(sink.spans().some((s) => s.span.spanId === last.spanId), 'the held span delivered');
    await stopOk(hs);
  });
});
