// hotspan over a real bus: a 3-node JetStream cluster of Debian's nats-server on loopback
// (lib/nats.mjs), 2 producer hotspans (otlp + pyroscope receivers -> nats exporter) and 2
// consumer hotspans (nats receiver -> correlator -> OTLP and Pyroscope sinks) splitting the 4
// partitions. The seed N+1 workload (apps/nplus1.mjs: the OpenTelemetry JS SDK and
// @pyroscope/nodejs) runs as three apps, two tenants, four services, each app's spans through one
// producer and its profiles through the other, so only the partition by (tenant, service) brings
// them to one correlator. Phase 1: every slow span comes out annotated as with one hotspan.
// Phase 2, mid-run: the NATS node a producer publishes through is killed (SIGKILL) and one
// consumer stopped and started again: every span and profile the producers acknowledged is
// delivered, duplicates counted and printed. Then, through a proxy that drops one frame: a lost
// publish ack is resent with its Nats-Msg-Id and stored once; a lost consumer ack brings a
// redelivery that is acked again and not handed on twice; a pipeline that refuses gets the
// message again later (nak), an unreadable one is terminated.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import net from 'node:net';
import { startHotspan } from './lib/hotspan.mjs';
import { runAppReport, nplus1SpanCount, assertNplus1Annotated } from './lib/apps.mjs';
import { attrs } from './lib/otlp.mjs';
import { makeCerts } from './lib/tls.mjs';
import { startSink } from './lib/sink.mjs';
import { startPyroscopeSink } from './lib/pyroscope_sink.mjs';
import { fetchMetrics, metric, metricSum } from './lib/metrics.mjs';
import { postProto } from './lib/http.mjs';
import { waitFor } from './lib/wait.mjs';
import * as otlp from './lib/otlp.mjs';
import { encodeProfilesRequest, expectedPprof } from './lib/otlp_profiles.mjs';
import { summarizePprof } from './lib/pprof.mjs';
import {
  startNatsCluster, natsServerVersion, startNatsProxy, natsPublish, framePayload, streamState,
} from './lib/nats.mjs';

const THRESHOLD_MS = 300;
const STREAM = 'HOTSPAN_IT';
// With 4 partitions (hs_nats_partition, pinned in test_nats.c): acme/user-db 0, acme/orders-db 0,
// acme/web-bff 1, globex/user-db 2, acme/api-server 3, globex/api-server 3. Consumer a takes 0-1,
// b takes 2-3: both correlate slow spans.
const APPS = [
  { tenant: 'acme', api: 'api-server', db: 'user-db', spansVia: 0 },
  { tenant: 'globex', api: 'api-server', db: 'user-db', spansVia: 1 },
  { tenant: 'acme', api: 'web-bff', db: 'orders-db', spansVia: 1 },
];
const CONSUMERS = [{ id: 'a', parts: "'0-1'" }, { id: 'b', parts: "'2-3'" }];

/** The sum of the series of `name` whose labels contain `part` (e.g. 'outcome="acked"'). */
const sumWhere = (m, name, part) => Object.entries(m)
  .filter(([k]) => k.startsWith(`${name}{`) && k.includes(part)).reduce((n, [, v]) => n + v, 0);
const profileKey = (p) => createHash('sha1').update(p.raw).update(JSON.stringify(p.labels)).digest('hex');


const list = (urls) => `[${urls.join(', ')}]`;

/** A free loopback port (bound to 0, then released). */
async function freePort() {
  const srv = net.createServer();
  await new Promise((res) => srv.listen(0, '127.0.0.1', res));
  const { port } = srv.address();
  await new Promise((res) => srv.close(res));
  return port;
}


const producerConfig = (id, urls) => `receivers:
  otlp: {protocols: {http: {endpoint: '127.0.0.1:0'}}}
  pyroscope: {endpoint: '127.0.0.1:0'}
exporters:
  nats/${id}:
    servers: ${list(urls)}
    stream: {name: ${STREAM}, replicas: 3, max_bytes: 64MiB}
    partitions: 4
    timeout: 2s
    retry_on_failure: {initial_interval: 100ms, max_interval: 500ms, max_elapsed_time: 120s}
service:
  telemetry: {admin: '127.0.0.1:0', log_level: info}
  pipelines:
    traces: {receivers: [otlp], exporters: [nats/${id}]}
    profiles: {receivers: [pyroscope], exporters: [nats/${id}]}
`;

const consumerConfig = (c, urls, sink, psink) => `receivers:
  nats/${c.id}:
    servers: ${list(urls)}
    stream: ${STREAM}
    partitions: 4
    consume_partitions: [${c.parts}]
    durable: gw
    ack_wait: 3s
    fetch_timeout: 500ms
processors:
  correlator:
    slow: {threshold: ${THRESHOLD_MS}ms}
    max_wait: 20s
    first_profile_wait: 0s
    slack: 2s
    bucket: 5s
exporters:
  otlp: {endpoint: 'http://127.0.0.1:${sink.port}'}
  pyroscope: {endpoint: 'http://127.0.0.1:${psink.port}'}
service:
  telemetry: {admin: '127.0.0.1:0', log_level: info}
  pipelines:
    traces: {receivers: [nats/${c.id}], processors: [correlator], exporters: [otlp]}
    profiles: {receivers: [nats/${c.id}], processors: [correlator], exporters: [pyroscope]}
`;

let cluster;
before(async () => {
  assert.ok(natsServerVersion(), 'nats-server is not installed: run scripts/setup');
  cluster = await startNatsCluster();
});
after(async () => { await cluster?.stop(); });

describe('nats: one frame lost on the wire', () => {
  const DUP = 'HOTSPAN_DUP';
  const node = () => cluster.nodes.findIndex((n) => n.running);
  let proxy;
  let producer;
  const started = [];
  const sinks = [];

  const producerYaml = (url) => `receivers:
  otlp: {protocols: {http: {endpoint: '127.0.0.1:0'}}}
exporters:
  nats:
    servers: [${url}]
    stream: {name: ${DUP}, replicas: 1, duplicate_window: 1m, max_bytes: 16MiB}
    subject_prefix: dup
    partitions: 1
    timeout: 500ms
    retry_on_failure: {initial_interval: 100ms, max_interval: 200ms, max_elapsed_time: 20s}
service:
  telemetry: {admin: '127.0.0.1:0'}
  pipelines:
    traces: {receivers: [otlp], exporters: [nats]}
`;
  const consumerYaml = (url, durable, sink, queue = '') => `receivers:
  nats:
    servers: [${url}]
    stream: ${DUP}
    subject_prefix: dup
    partitions: 1
    durable: ${durable}
    ack_wait: 1s
    fetch_timeout: 300ms
    nak_delay: 200ms
exporters:
  otlp:
    endpoint: 'http://127.0.0.1:${sink.port}'
    retry_on_failure: {initial_interval: 100ms, max_interval: 200ms}
    ${queue}
service:
  telemetry: {admin: '127.0.0.1:0'}
  pipelines:
    traces: {receivers: [nats], exporters: [otlp]}
`;
  const startConsumer = async (yaml) => {
    const hs = await startHotspan(yaml, { waitFor: ['admin'] });
    started.push(hs);
    await hs.waitForLog(/consuming 1 partitions of stream HOTSPAN_DUP"/, 30000);
    return hs;
  };
  const newSink = async () => { const s = await startSink(); sinks.push(s); return s; };
  const send = async (n) => {
    const spans = Array.from({ length: n }, (_, i) => otlp.makeSpan({ name: `op-${i}` }));
    const res = await postProto(producer.ports.otlp, otlp.encodeRequest(spans, { resource: otlp.defaultResource('dup-svc') }));
    assert.equal(res.status, 200);
    return spans.map((s) => s.spanId);
  };
  const m = async (hs, name, labels = {}) => metric(await fetchMetrics(hs.ports.admin), name, labels) ?? 0;

  after(async () => {
    for (const r of await Promise.all([producer, ...started].filter(Boolean).map((h) => h.stop()))) {
      assert.equal(r.code, 0, `exit code on SIGTERM\n${r.logs.slice(-30).join('\n')}`);
    }
    await proxy?.stop();
    for (const s of sinks) await s.stop();
  });

  it('a lost publish ack: the resend keeps its Nats-Msg-Id and the stream stores it once', async () => {
    let armed = true;
    proxy = await startNatsProxy(cluster.nodes[node()].port, {
      dropFromServer: (f) => {
        if (!armed || (f.op !== 'MSG' && f.op !== 'HMSG') || !f.parts[1].startsWith('_INBOX.')) return false;
        if (!framePayload(f).toString().includes(`"stream":"${DUP}"`)) return false;
        armed = false; // the first JetStream ack of ours, once
        return true;
      },
    });
    producer = await startHotspan(producerYaml(proxy.url), { waitFor: ['otlp', 'admin'] });
    await producer.waitForLog(new RegExp(`stream ${DUP} created`), 30000);
    const ids = await send(3);
    await waitFor(async () => await m(producer, 'hotspan_exporter_sent_spans_total', { exporter: 'nats', signal: 'traces' }) === 3,
      15000, () => 'the 3 spans sent');
    assert.equal(proxy.dropped.server, 1, 'one ack was lost');
    assert.equal(await m(producer, 'hotspan_exporter_nats_duplicates_total', { exporter: 'nats' }), 1,
      'the resend was acknowledged as a duplicate');
    assert.ok(await m(producer, 'hotspan_exporter_retries_total', { exporter: 'nats', signal: 'traces' }) >= 1);
    assert.equal((await streamState(cluster, DUP)).messages, 1, 'stored once');

    const sink = await newSink();
    const c = await startConsumer(consumerYaml(cluster.nodes[node()].url, 'dup', sink));
    await sink.waitForSpans(3, 15000);
    await waitFor(async () => await m(c, 'hotspan_receiver_nats_messages_total', { receiver: 'nats', outcome: 'acked' }) === 1,
      10000, () => 'the message acked');
    assert.deepEqual(sink.spans().map((s) => s.span.spanId).sort(), ids.sort());
  });

  it('a lost consumer ack: the redelivery is acked again, counted, and not handed on twice', async () => {
    let armed = true;
    const p2 = await startNatsProxy(cluster.nodes[node()].port, {
      dropFromClient: (f) => {
        if (!armed || f.op !== 'PUB' || !f.parts[1].startsWith('$JS.ACK.')) return false;
        if (framePayload(f).toString() !== '+ACK') return false;
        armed = false;
        return true;
      },
    });
    try {
      const sink = await newSink();
      const c = await startConsumer(consumerYaml(p2.url, 'dup2', sink)); // the stream's message again
      await waitFor(async () => await m(c, 'hotspan_receiver_nats_messages_total', { receiver: 'nats', outcome: 'duplicate' }) === 1,
        15000, () => 'the redelivery recognised');
      assert.equal(p2.dropped.client, 1);
      assert.equal(await m(c, 'hotspan_receiver_nats_messages_total', { receiver: 'nats', outcome: 'acked' }), 1);
      assert.ok(await m(c, 'hotspan_receiver_nats_redelivered_total', { receiver: 'nats' }) >= 1);
      await sink.waitForSpans(3, 10000);
      assert.equal(await m(c, 'hotspan_receiver_accepted_spans_total', { receiver: 'nats', transport: 'nats' }), 3,
        'handed on once');
      assert.equal(sink.spans().length, 3);
    } finally {
      await p2.stop();
    }
  });

  it('a refused message comes again (nak), an unreadable one is terminated', async () => {
    const ids = await send(2); // a second message; the first is in the stream already
    await waitFor(async () => (await streamState(cluster, DUP)).messages === 2, 10000, () => 'stored');
    await natsPublish(cluster.nodes[node()].port, 'dup.traces.00', { 'Hotspan-Signal': 'traces' }, 'not protobuf');
    await waitFor(async () => (await streamState(cluster, DUP)).messages === 3, 10000, () => 'stored');
    const sink = await newSink();
    sink.respondAlways({ status: 503 }); // the backend is down: the exporter's one slot stays busy
    const c = await startConsumer(consumerYaml(cluster.nodes[node()].url, 'dup3', sink,
      'sending_queue: {queue_size: 1, num_consumers: 1}'));
    await waitFor(async () => await m(c, 'hotspan_receiver_nats_messages_total', { receiver: 'nats', outcome: 'nacked' }) >= 1,
      15000, () => 'a message refused and naked');
    await waitFor(async () => await m(c, 'hotspan_receiver_nats_messages_total', { receiver: 'nats', outcome: 'terminated' }) === 1,
      15000, () => 'the unreadable message terminated');
    await c.waitForLog(/dropped \(terminated\): spans: /);
    sink.clearResponses();
    await sink.waitFor(() => new Set(sink.spans().map((s) => s.span.spanId)).size === 5, 15000,
      () => `5 distinct spans, have ${sink.spans().length}`);
    for (const id of ids) assert.ok(sink.spans().some((s) => s.span.spanId === id), `${id} delivered after its nak`);
    assert.equal(await m(c, 'hotspan_receiver_nats_messages_total', { receiver: 'nats', outcome: 'acked' }), 2);
    assert.ok(await m(c, 'hotspan_receiver_nats_redelivered_total', { receiver: 'nats' }) >= 1);
  });

  it('a batch larger than the server\'s max_payload goes as several messages of whole spans', async () => {
    const before = (await streamState(cluster, DUP)).messages;
    const blob = 'x'.repeat(400);
    const spans = Array.from({ length: 3000 }, (_, i) => otlp.makeSpan({ name: `big-${i}`,
      attributes: [{ key: 'blob', value: { stringValue: blob } }] }));
    const body = otlp.encodeRequest(spans, { resource: otlp.defaultResource('dup-svc') });
    assert.ok(body.length > 1200000, `${body.length} bytes: over nats-server's 1 MiB max_payload`);
    const res = await postProto(producer.ports.otlp, body);
    assert.equal(res.status, 200);
    const ids = new Set(spans.map((x) => x.spanId));
    const sink = sinks[0]; // consumer `dup`'s, running since the first test
    await sink.waitFor(() => sink.spans().filter((x) => ids.has(x.span.spanId)).length === ids.size, 20000,
      () => `the 3000 spans, have ${sink.spans().filter((x) => ids.has(x.span.spanId)).length}`);
    const after = (await streamState(cluster, DUP)).messages;
    assert.ok(after - before >= 2, `${after - before} messages for one batch`);
    assert.equal(await m(producer, 'hotspan_exporter_sent_spans_total', { exporter: 'nats', signal: 'traces' }), 3 + 2 + 3000);

    // a gateway asking for less than one of those messages per pull request still gets them
    const small = await newSink();
    await startConsumer(consumerYaml(cluster.nodes[node()].url, 'dup4', small).replace(
      'fetch_timeout: 300ms', 'fetch_timeout: 300ms\n    fetch_max_bytes: 64KiB'));
    await small.waitFor(() => small.spans().filter((x) => ids.has(x.span.spanId)).length === ids.size, 20000,
      () => `the 3000 spans through 64 KiB pull requests, have ${small.spans().filter((x) => ids.has(x.span.spanId)).length}`);
  });
});

describe('nats: producers -> JetStream -> consumers keep each service\'s spans and profiles together', () => {
  let sink;
  let psink;
  const producers = [];
  const consumers = new Map(); // id -> hotspan
  const stoppedRuns = [];
  let phase1 = [];
  let phase2 = [];
  let killedNode;
  let stoppedMetrics;

  const startConsumer = async (c) => {
    const hs = await startHotspan(consumerConfig(c, cluster.urls, sink, psink), { waitFor: ['admin'] });
    await hs.waitForLog(/consuming 2 partitions of stream HOTSPAN_IT"/, 30000);
    consumers.set(c.id, hs);
  };
  const runApps = (over = {}) => Promise.all(APPS.map((a) => runAppReport('nplus1.mjs', {
    OTLP_URL: `http://127.0.0.1:${producers[a.spansVia].ports.otlp}/v1/traces`,
    PYROSCOPE_URL: `http://127.0.0.1:${producers[1 - a.spansVia].ports.pyroscope}`,
    TENANT: a.tenant, API_SERVICE: a.api, DB_SERVICE: a.db,
    PLAN: 'FFSFFSFFSF', FAST_USERS: '3', SLOW_USERS: '45', FLUSH_MS: '1000',
    WARMUP_MS: '1500', TAIL_MS: '4000', ...over,
  }).then((run) => ({ ...a, run }))));
  const missing = (runs) => {
    const ids = new Set(sink.spans().map((s) => s.span.spanId));
    return runs.flatMap(({ run, tenant, api, db }) => run.requests
      .filter((r) => !ids.has(r.apiSpanId) || !ids.has(r.dbSpanId))
      .map((r) => `${tenant}/${api}:${ids.has(r.apiSpanId)} ${db}:${ids.has(r.dbSpanId)} ${r.kind}`)).join(', ');
  };
  const spanCount = nplus1SpanCount;
  const sumOver = async (procs, name, labels = null) => {
    let n = 0;
    for (const p of procs) {
      const m = await fetchMetrics(p.ports.admin);
      n += labels ? metric(m, name, labels) ?? 0 : metricSum(m, name);
    }
    return n;
  };
  /** The index of the node holding the client connection named `name`. */
  const nodeOf = async (name) => {
    for (let i = 0; i < cluster.nodes.length; i++) {
      if (!cluster.nodes[i].running) continue;
      const connz = await (await fetch(`http://127.0.0.1:${cluster.nodes[i].httpPort}/connz`)).json();
      if ((connz.connections || []).some((c) => c.name === name)) return i;
    }
    return -1;
  };

  before(async () => {
    sink = await startSink();
    psink = await startPyroscopeSink();
    for (const id of ['p0', 'p1']) {
      const hs = await startHotspan(producerConfig(id, cluster.urls), { waitFor: ['otlp', 'pyroscope', 'admin'] });
      await hs.waitForLog(new RegExp(`stream ${STREAM} (created|found|exists)`), 30000);
      producers.push(hs);
    }
    for (const c of CONSUMERS) await startConsumer(c);
    // phase 1: the topology holds
    phase1 = await runApps();
    await sink.waitFor(() => new Set(sink.spans().map((s) => s.span.spanId)).size >= spanCount(phase1), 40000,
      () => `expected ${spanCount(phase1)} spans, have ${sink.spans().length}; missing: ${missing(phase1)}`);
    // phase 2: mid-run, the node p0 publishes through dies and consumer b stops, then restarts
    const before2 = await sumOver(producers, 'hotspan_receiver_accepted_spans_total');
    const apps = runApps();
    await waitFor(async () => await sumOver(producers, 'hotspan_receiver_accepted_spans_total') >= before2 + 60,
      30000, () => 'the apps past their warm-up');
    killedNode = await nodeOf('hotspan nats/p0');
    assert.ok(killedNode >= 0, 'p0 is connected to a node');
    const b = consumers.get('b');
    consumers.delete('b');
    stoppedMetrics = await fetchMetrics(b.ports.admin);
    await Promise.all([cluster.kill(killedNode), b.stop().then((r) => stoppedRuns.push(r))]);
    const during = await sumOver(producers, 'hotspan_receiver_accepted_spans_total');
    await waitFor(async () => await sumOver(producers, 'hotspan_receiver_accepted_spans_total') >= during + 40,
      30000, () => 'more spans accepted while consumer b is down');
    await startConsumer(CONSUMERS[1]);
    phase2 = await apps;
    const want = spanCount(phase1) + spanCount(phase2);
    await sink.waitFor(() => new Set(sink.spans().map((s) => s.span.spanId)).size >= want, 45000,
      () => `expected ${want} distinct spans, have ${new Set(sink.spans().map((s) => s.span.spanId)).size}`);
    const profiles = await sumOver(producers, 'hotspan_receiver_accepted_profiles_total');
    await psink.waitFor(() => new Set(psink.profiles().map(profileKey)).size >= profiles, 30000,
      () => `expected ${profiles} distinct profiles, have ${new Set(psink.profiles().map(profileKey)).size}`);
  });

  after(async () => {
    for (const r of await Promise.all([...producers, ...consumers.values()].map((h) => h.stop()))) {
      assert.equal(r.code, 0, `exit code on SIGTERM\n${r.logs.slice(-30).join('\n')}`);
    }
    for (const r of stoppedRuns) assert.equal(r.code, 0, `the stopped consumer exited cleanly\n${r.logs.slice(-30).join('\n')}`);
    await sink?.stop();
    await psink?.stop();
  });

  it('phase 1: every slow span is annotated as with one hotspan, though spans and profiles entered apart', async () => {
    const slow = assertNplus1Annotated(sink.spans(), phase1);
    assert.equal(slow, 9);
    // both consumers correlated (the partitions split the keys), each with its own profiles
    const a = consumers.get('a');
    assert.ok(metricSum(await fetchMetrics(a.ports.admin), 'hotspan_correlator_annotated_spans_total') > 0, 'consumer a annotated');
    assert.ok(metricSum(stoppedMetrics, 'hotspan_correlator_annotated_spans_total') > 0, 'consumer b annotated');
    for (const h of [...producers, a]) {
      assert.equal(metricSum(await fetchMetrics(h.ports.admin), 'hotspan_nats_connected'), 1, 'connected');
    }
  });

  it('phase 2: a NATS node killed and a consumer restarted lose nothing the producers acknowledged', async () => {
    const spans = sink.spans();
    const ids = new Set(spans.map((s) => s.span.spanId));
    const want = spanCount(phase1) + spanCount(phase2);
    const took = await sumOver(producers, 'hotspan_receiver_accepted_spans_total');
    assert.equal(took, want, 'the producers took every span the apps exported');
    assert.equal(ids.size, want, 'every span the producers acknowledged reached the sink');
    for (const { run } of [...phase1, ...phase2]) {
      for (const r of run.requests) {
        assert.ok(ids.has(r.apiSpanId) && ids.has(r.dbSpanId), `request ${r.traceId} arrived`);
        const kids = new Set(spans.filter((x) => x.span.parentSpanId === r.dbSpanId).map((x) => x.span.spanId));
        assert.equal(kids.size, r.users, `the ${r.users} queries of ${r.dbSpanId}`);
      }
    }
    const profilesTaken = await sumOver(producers, 'hotspan_receiver_accepted_profiles_total');
    const got = psink.profiles();
    const distinct = new Set(got.map(profileKey));
    assert.ok(distinct.size >= profilesTaken, `profiles acknowledged ${profilesTaken}, distinct at the sink ${distinct.size}`);
    const sent = await sumOver(producers, 'hotspan_exporter_sent_spans_total');
    assert.equal(sent, want, 'the producers counted every span sent (acknowledged by JetStream)');

    const live = [...consumers.values()];
    const reconnects = metricSum(await fetchMetrics(producers[0].ports.admin), 'hotspan_nats_reconnects_total');
    assert.ok(reconnects >= 1, `p0 reconnected after its node died (${reconnects})`);
    const outcome = async (o) => {
      let n = sumWhere(stoppedMetrics, 'hotspan_receiver_nats_messages_total', `outcome="${o}"`);
      for (const h of live) n += sumWhere(await fetchMetrics(h.ports.admin), 'hotspan_receiver_nats_messages_total', `outcome="${o}"`);
      return n;
    };
    const slow2 = phase2.flatMap(({ run }) => run.requests.filter((q) => q.kind === 'slow'));
    const annotated2 = slow2.filter((r) => {
      const a = attrs(spans.find((x) => x.span.spanId === r.dbSpanId)?.span);
      return a['profile.match'] !== undefined && a['profile.match'] !== 'none';
    }).length;
    console.log(`[nats] killed ${cluster.nodes[killedNode].name} (p0's node), restarted consumer b: ` +
      `${want} spans and ${profilesTaken} profiles acknowledged, all delivered; duplicates at the sinks: ` +
      `${spans.length - ids.size} spans, ${got.length - distinct.size} profiles; stream-side duplicates ` +
      `(a resend after a lost ack) ${await sumOver(producers, 'hotspan_exporter_nats_duplicates_total')}; ` +
      `consumers: acked ${await outcome('acked')}, redelivered ` +
      `${await sumOver(live, 'hotspan_receiver_nats_redelivered_total') + metricSum(stoppedMetrics, 'hotspan_receiver_nats_redelivered_total')}, ` +
      `duplicates recognised ${await outcome('duplicate')}, nacked ${await outcome('nacked')}; ` +
      `p0 reconnects ${reconnects}; phase-2 slow spans annotated: ${annotated2}/${slow2.length}`);
  });
});

describe('nats: credentials and TLS', () => {
  let certs;
  let server;
  let dir;
  const started = [];

  before(async () => {
    certs = makeCerts();
    dir = mkdtempSync(join(tmpdir(), 'hotspan-nats-tls-'));
    const port = await freePort();
    const httpPort = await freePort();
    const conf = join(dir, 'tls.conf');
    // one server, mutual TLS and a token: the exporter must bring all three to publish
    writeFileSync(conf, [`listen: 127.0.0.1:${port}`, `http: 127.0.0.1:${httpPort}`,
      `jetstream { store_dir: "${join(dir, 'store')}", max_memory_store: 16MB, max_file_store: 64MB }`,
      `tls { cert_file: "${certs.server}", key_file: "${certs.serverKey}", ca_file: "${certs.ca}", verify: true }`,
      'authorization { token: "s3cret-token" }', ''].join('\n'));
    const proc = spawn('nats-server', ['-c', conf], { stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    proc.stderr.setEncoding('utf8').on('data', (d) => { log += d; });
    server = { proc, port, httpPort, exited: new Promise((res) => proc.on('exit', res)) };
    await waitFor(async () => (await fetch(`http://127.0.0.1:${httpPort}/healthz`).catch(() => null))?.status === 200,
      15000, () => `nats-server with TLS up; log:\n${log}`);
  });

  after(async () => {
    for (const r of await Promise.all(started.map((h) => h.stop()))) {
      assert.equal(r.code, 0, `exit code on SIGTERM\n${r.logs.slice(-30).join('\n')}`);
    }
    server?.proc.kill('SIGTERM');
    await server?.exited;
    rmSync(dir, { recursive: true, force: true });
    certs?.cleanup();
  });

  const yaml = (token) => `receivers:
  otlp: {protocols: {http: {endpoint: '127.0.0.1:0'}}}
exporters:
  nats:
    servers: [tls://127.0.0.1:${server.port}]
    auth: {token: ${token}}
    tls: {ca_file: '${certs.ca}', cert_file: '${certs.client}', key_file: '${certs.clientKey}'}
    stream: {name: HOTSPAN_TLS, replicas: 1, max_bytes: 8MiB}
    subject_prefix: tls
    partitions: 2
    timeout: 1s
    retry_on_failure: {initial_interval: 100ms, max_interval: 200ms, max_elapsed_time: 5s}
service:
  telemetry: {admin: '127.0.0.1:0'}
  pipelines:
    traces: {receivers: [otlp], exporters: [nats]}
`;

  it('a token over mutual TLS: the stream is made and spans are acknowledged', async () => {
    const hs = await startHotspan(yaml('s3cret-token'), { waitFor: ['otlp', 'admin'] });
    started.push(hs);
    await hs.waitForLog(/connected to NATS at tls:\/\/127\.0\.0\.1/);
    await hs.waitForLog(/stream HOTSPAN_TLS created/, 15000);
    const spans = [otlp.makeSpan(), otlp.makeSpan()];
    assert.equal((await postProto(hs.ports.otlp, otlp.encodeRequest(spans))).status, 200);
    await waitFor(async () => metric(await fetchMetrics(hs.ports.admin), 'hotspan_exporter_sent_spans_total',
      { exporter: 'nats', signal: 'traces' }) === 2, 10000, () => 'the 2 spans acknowledged');
    const jsz = await (await fetch(`http://127.0.0.1:${server.httpPort}/jsz?streams=true&accounts=true`)).json();
    const stream = jsz.account_details.flatMap((a) => a.stream_detail || []).find((x) => x.name === 'HOTSPAN_TLS');
    assert.equal(stream.state.messages, 1, 'one message: the two spans of one (tenant, service)');
  });

  it('a wrong token is refused by the server: logged, not connected, tried again later', async () => {
    const hs = await startHotspan(yaml('wrong-token'), { waitFor: ['otlp', 'admin'] });
    started.push(hs);
    // refused at the first attempt, by libnats' own retry right after, or while the connection
    // is still being made: each way the server's reason is said
    await hs.waitForLog(/(cannot connect to NATS: |NATS connection closed \(|not connected to NATS yet \()[Aa]uthorization [Vv]iolation/, 15000);
    assert.equal(metricSum(await fetchMetrics(hs.ports.admin), 'hotspan_nats_connected'), 0);
  });
});

describe('nats: OTLP profiles cross the bus as pprof, converted once', () => {
  const OTLP_STREAM = 'HOTSPAN_OTLP';
  let producer;
  let consumer;
  let psink;
  after(async () => {
    for (const r of await Promise.all([producer, consumer].filter(Boolean).map((h) => h.stop()))) {
      assert.equal(r.code, 0, `exit code on SIGTERM\n${r.logs.slice(-30).join('\n')}`);
    }
    await psink?.stop();
  });

  it('an OTLP profiles request reaches the gateway\'s Pyroscope exporter with the source totals, functions and span values', async () => {
    // the node phase 2 killed comes back first: until the meta leader sees it gone, a new
    // stream may be placed on it and its creation time out
    for (const [i, n] of cluster.nodes.entries()) if (!n.running) await cluster.restart(i);
    await cluster.ready();
    const url = cluster.nodes[0].url;
    psink = await startPyroscopeSink();
    producer = await startHotspan(`receivers:
  otlp: {protocols: {http: {endpoint: '127.0.0.1:0'}}}
exporters:
  nats:
    servers: [${url}]
    stream: {name: ${OTLP_STREAM}, replicas: 1, max_bytes: 16MiB}
    subject_prefix: otlpprof
    partitions: 2
    retry_on_failure: {initial_interval: 100ms, max_interval: 500ms, max_elapsed_time: 60s}
service:
  telemetry: {admin: '127.0.0.1:0'}
  pipelines:
    profiles: {receivers: [otlp], exporters: [nats]}
`, { waitFor: ['admin', 'otlp'] });
    consumer = await startHotspan(`receivers:
  nats:
    servers: [${url}]
    stream: ${OTLP_STREAM}
    subject_prefix: otlpprof
    partitions: 2
    durable: gw
    fetch_timeout: 300ms
exporters:
  pyroscope: {endpoint: 'http://127.0.0.1:${psink.port}'}
service:
  telemetry: {admin: '127.0.0.1:0'}
  pipelines:
    profiles: {receivers: [nats], exporters: [pyroscope]}
`, { waitFor: ['admin'] });
    const spanId = 'a1b2c3d4e5f60718';
    const p = {
      sampleType: ['samples', 'count'], periodType: ['cpu', 'nanoseconds'], period: 10000000,
      timeNanos: BigInt(Date.now() - 20000) * 1000000n, durationNanos: 10000000000n,
      samples: [
        { stack: ['main', 'Checkout.post', 'Tax.compute'], value: 7,
          link: { traceId: '0123456789abcdef0123456789abcdef', spanId } },
        { stack: ['main', 'Checkout.post'], value: 2 },
      ],
    };
    const body = encodeProfilesRequest({ resources: [{ attributes: { 'service.name': 'checkout' },
      scopes: [{ profiles: [p] }] }] });
    const res = await postProto(producer.ports.otlp, body, {}, '/v1development/profiles');
    assert.equal(res.status, 200);
    await psink.waitFor(() => psink.profiles('push').length >= 1, 30000, () => 'the profile at the sink');
    const got = psink.profiles('push');
    assert.equal(got.length, 1);
    assert.equal(got[0].labels.service_name, 'checkout');
    assert.equal(got[0].labels.__name__, 'process_cpu');
    const have = summarizePprof(got[0].raw);
    const want = expectedPprof(p);
    assert.deepEqual(have.totals, want.totals);
    assert.deepEqual(have.functions['Tax.compute'], want.functions['Tax.compute']);
    assert.deepEqual(have.spans, want.spans);
    assert.equal(metric(await fetchMetrics(producer.ports.admin), 'hotspan_exporter_sent_profiles_total',
      { exporter: 'nats', signal: 'profiles' }), 1);
  });
});
