// A routed gateway tier on loopback: 2 first-tier hotspans (load_balancing, DNS resolver) in front
// of 3 gateway hotspans (correlator, exporters to one OTLP sink and one Pyroscope sink), on
// 127.0.0.9, .10, .11 with the same ports. The first tiers resolve gw.hotspan.test through a
// hosts file bind-mounted over /etc/hosts in a user+mount namespace (lib/netns.mjs), which the
// test rewrites. The seed N+1 workload (apps/nplus1.mjs: the OpenTelemetry JS SDK and
// @pyroscope/nodejs) runs as three apps: two tenants, four services, each app's spans to one
// first tier and its profiles to the other, so only routing by the same key brings them together.
// Phase 1: every slow user-db span comes out annotated as with one hotspan. Phase 2, mid-run: the
// busiest gateway is stopped and a fourth (127.0.0.12) added, the name's answer changed: every span
// and profile the first tiers acknowledged reaches the sinks (duplicates counted and printed), and
// the share of routing keys that moved is printed.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { startHotspan } from './lib/hotspan.mjs';
import { runAppReport, nplus1SpanCount, assertNplus1Annotated } from './lib/apps.mjs';
import { attrs } from './lib/otlp.mjs';
import { startSink } from './lib/sink.mjs';
import { startPyroscopeSink } from './lib/pyroscope_sink.mjs';
import { fetchMetrics, metricSum } from './lib/metrics.mjs';
import { hostsFile, sharedPorts } from './lib/netns.mjs';

const THRESHOLD_MS = 300;
const NAME = 'gw.hotspan.test';
const GATEWAYS = ['127.0.0.9', '127.0.0.10', '127.0.0.11'];
const ADDED = '127.0.0.12';
// two tenants, four services; spans and profiles of one app enter through different first tiers
const APPS = [
  { tenant: 'acme', api: 'api-server', db: 'user-db', spansVia: 0 },
  { tenant: 'globex', api: 'api-server', db: 'user-db', spansVia: 1 },
  { tenant: 'acme', api: 'web-bff', db: 'orders-db', spansVia: 1 },
];



const gatewayConfig = (addr, [otlpPort, pyroPort], sink, psink) => `receivers:
  otlp: {protocols: {http: {endpoint: '${addr}:${otlpPort}'}}}
  pyroscope: {endpoint: '${addr}:${pyroPort}'}
processors:
  correlator:
    slow: {threshold: ${THRESHOLD_MS}ms}
    max_wait: 20s
    first_profile_wait: 1s # api-server sends no profiles: its slow spans need not wait for one
    bucket: 5s
exporters:
  otlp: {endpoint: 'http://127.0.0.1:${sink.port}'}
  pyroscope: {endpoint: 'http://127.0.0.1:${psink.port}'}
service:
  telemetry: {admin: '127.0.0.1:0', log_level: info}
  pipelines:
    traces: {receivers: [otlp], processors: [correlator], exporters: [otlp]}
    profiles: {receivers: [pyroscope], processors: [correlator], exporters: [pyroscope]}
`;

const firstTierConfig = ([otlpPort, pyroPort]) => `receivers:
  otlp: {protocols: {http: {endpoint: '127.0.0.1:0'}}}
  pyroscope: {endpoint: '127.0.0.1:0'}
exporters:
  load_balancing:
    resolver:
      dns: {hostname: ${NAME}, interval: 200ms, timeout: 1s}
    protocol:
      otlp:
        port: ${otlpPort}
        retry_on_failure: {initial_interval: 100ms, max_interval: 500ms}
      pyroscope:
        port: ${pyroPort}
        retry_on_failure: {initial_interval: 100ms, max_interval: 500ms}
service:
  telemetry: {admin: '127.0.0.1:0', log_level: info}
  pipelines:
    traces: {receivers: [otlp], exporters: [load_balancing]}
    profiles: {receivers: [pyroscope], exporters: [load_balancing]}
`;

describe('load_balancing: a routed gateway tier keeps each service\'s spans and profiles together', () => {
  let sink;
  let psink;
  let hosts;
  let ports;
  const gateways = new Map(); // addr -> hotspan
  const stopped = [];
  let tiers = [];
  let phase1 = [];
  let phase2 = [];
  let stoppedAddr;

  const startGateway = async (addr) => {
    gateways.set(addr, await startHotspan(gatewayConfig(addr, ports, sink, psink),
      { waitFor: ['otlp', 'pyroscope', 'admin'] }));
  };
  const runApps = () => Promise.all(APPS.map((a) => runAppReport('nplus1.mjs', {
    OTLP_URL: `http://127.0.0.1:${tiers[a.spansVia].ports.otlp}/v1/traces`,
    PYROSCOPE_URL: `http://127.0.0.1:${tiers[1 - a.spansVia].ports.pyroscope}`,
    TENANT: a.tenant, API_SERVICE: a.api, DB_SERVICE: a.db,
    PLAN: 'FFSFFSFFSF', FAST_USERS: '3', SLOW_USERS: '45', FLUSH_MS: '1000',
    WARMUP_MS: '1500', TAIL_MS: '7000',
  }).then((run) => ({ ...a, run }))));
  const spanCount = nplus1SpanCount;
  const accepted = async (name) => {
    let n = 0;
    for (const t of tiers) n += metricSum(await fetchMetrics(t.ports.admin), name);
    return n;
  };

  before(async () => {
    sink = await startSink();
    psink = await startPyroscopeSink();
    ports = await sharedPorts([...GATEWAYS, ADDED], 2);
    hosts = hostsFile(NAME, GATEWAYS);
    for (const addr of GATEWAYS) await startGateway(addr);
    tiers = await Promise.all([0, 1].map(() => startHotspan(firstTierConfig(ports),
      { waitFor: ['otlp', 'pyroscope', 'admin'], hosts: hosts.path })));
    for (const t of tiers) await t.waitForLog(/3 backends \(3 joined/);

    // phase 1: the topology holds
    phase1 = await runApps();
    await sink.waitForSpans(spanCount(phase1), 40000);

    // phase 2: mid-run, the busiest gateway goes and another comes
    await startGateway(ADDED);
    const before2 = await accepted('hotspan_receiver_accepted_spans_total');
    const apps = runApps();
    while (await accepted('hotspan_receiver_accepted_spans_total') < before2 + 60) {
      await new Promise((r) => setTimeout(r, 100)); // the apps are past their warm-up
    }
    let busiest = 0;
    for (const addr of GATEWAYS) {
      const n = metricSum(await fetchMetrics(gateways.get(addr).ports.admin), 'hotspan_receiver_accepted_spans_total');
      if (n > busiest) { busiest = n; stoppedAddr = addr; }
    }
    const gone = gateways.get(stoppedAddr);
    gateways.delete(stoppedAddr);
    stopped.push(await gone.stop()); // drains: what it took reaches the sinks
    // the first tiers keep its keys in its queues while it is down but still in the answer
    const queued = async () => {
      let n = 0;
      for (const t of tiers) {
        const m = await fetchMetrics(t.ports.admin);
        for (const [k, v] of Object.entries(m)) {
          if (k.startsWith('hotspan_exporter_queue_size{') && k.includes(`backend="${stoppedAddr}"`)) n += v;
        }
      }
      return n;
    };
    while (await queued() === 0) await new Promise((r) => setTimeout(r, 50));
    hosts.set([...GATEWAYS.filter((a) => a !== stoppedAddr), ADDED]);
    for (const t of tiers) await t.waitForLog(/3 backends \(1 joined, 1 left/, 15000);
    phase2 = await apps;
    const want = spanCount(phase1) + spanCount(phase2);
    await sink.waitFor(() => new Set(sink.spans().map((s) => s.span.spanId)).size >= want, 40000,
      () => `expected ${want} distinct spans, have ${new Set(sink.spans().map((s) => s.span.spanId)).size}`);
  });

  after(async () => {
    for (const t of tiers) {
      const r = await t.stop();
      assert.equal(r.code, 0, `first tier exit code on SIGTERM\n${r.logs.slice(-30).join('\n')}`);
    }
    for (const g of gateways.values()) {
      const r = await g.stop();
      assert.equal(r.code, 0, `gateway exit code on SIGTERM\n${r.logs.slice(-30).join('\n')}`);
    }
    for (const r of stopped) assert.equal(r.code, 0, 'the stopped gateway exited cleanly');
    if (sink) await sink.stop();
    if (psink) await psink.stop();
  });

  it('phase 1: every slow span is annotated as with one hotspan, though spans and profiles entered apart', async () => {
    const slow = assertNplus1Annotated(sink.spans(), phase1);
    assert.equal(slow, 9);
    // the keys spread: more than one gateway correlated something
    let busy = 0;
    for (const addr of GATEWAYS) {
      const g = gateways.get(addr);
      if (!g) { busy += 1; continue; } // the stopped one: the busiest
      busy += metricSum(await fetchMetrics(g.ports.admin), 'hotspan_correlator_annotated_spans_total') > 0;
    }
    assert.ok(busy >= 2, `gateways that annotated spans: ${busy}`);
  });

  it('phase 2: nothing acknowledged is lost when a gateway goes and another comes', async () => {
    const spans = sink.spans();
    const ids = new Set(spans.map((s) => s.span.spanId));
    const want = spanCount(phase1) + spanCount(phase2);
    const took = await accepted('hotspan_receiver_accepted_spans_total');
    assert.equal(took, want, 'the first tiers took every span the apps exported');
    assert.equal(ids.size, want, 'every span the first tiers acknowledged reached the sink');
    for (const { run } of [...phase1, ...phase2]) {
      for (const r of run.requests) {
        assert.ok(ids.has(r.apiSpanId) && ids.has(r.dbSpanId), `request ${r.traceId} arrived`);
        const kids = new Set(spans.filter((x) => x.span.parentSpanId === r.dbSpanId).map((x) => x.span.spanId));
        assert.equal(kids.size, r.users, `the ${r.users} queries of ${r.dbSpanId}`);
      }
    }
    const profilesTaken = await accepted('hotspan_receiver_accepted_profiles_total');
    const got = psink.profiles();
    const distinct = new Set(got.map((p) => createHash('sha1').update(p.raw).update(JSON.stringify(p.labels)).digest('hex')));
    assert.ok(distinct.size >= profilesTaken, `profiles acknowledged ${profilesTaken}, distinct at the sink ${distinct.size}`);

    let moved = 0;
    let keys = 0;
    let rerouted = 0;
    for (const t of tiers) {
      const m = await fetchMetrics(t.ports.admin);
      assert.equal(metricSum(m, 'hotspan_load_balancing_backends'), 3);
      assert.ok(metricSum(m, 'hotspan_load_balancing_ring_changes_total') >= 2);
      moved += metricSum(m, 'hotspan_load_balancing_keys_moved_total');
      keys += metricSum(m, 'hotspan_load_balancing_keys');
      rerouted += metricSum(m, 'hotspan_load_balancing_rerouted_total');
    }
    const slow2 = phase2.flatMap(({ run }) => run.requests.filter((q) => q.kind === 'slow'));
    const annotated2 = slow2.filter((r) => {
      const s = spans.find((x) => x.span.spanId === r.dbSpanId);
      return s && attrs(s.span)['profile.match'] !== undefined && attrs(s.span)['profile.match'] !== 'none';
    }).length;
    console.log(`[load_balancing] stopped ${stoppedAddr}, added ${ADDED}: ` +
      `${moved} of ${keys} routing keys moved (${((100 * moved) / Math.max(keys, 1)).toFixed(0)}%, summed over both first tiers); ` +
      `${rerouted} items re-routed off the stopped gateway; duplicates: ${spans.length - ids.size} spans, ` +
      `${got.length - distinct.size} profiles; phase-2 slow spans annotated: ${annotated2}/${slow2.length}`);
    assert.ok(moved > 0, 'the stopped gateway owned keys, which moved');
    assert.ok(rerouted > 0, 'what the first tiers held for the stopped gateway went elsewhere');
    assert.ok(moved < keys, 'keys of the gateways that stayed did not move');
  });
});
