// Hostile tenant (issue 15, item 4), through the real binary with per-tenant tokens on both
// receivers and on the admin endpoint. Tenant b's client, with b's token, names tenant a on its
// resource (tenant.id=a, the correlator's labels.trace_tenant) while tenant a's profiles are
// indexed: its slow spans are annotated from b's own profiles (or none), never with a's
// functions, and leave under X-Scope-OrgID b; the refusal is counted. b's profiles sent with
// `X-Scope-OrgID: a` and a `tenant` label stay b's. Meanwhile a good client of tenant a loses
// nothing and sees only its own functions. /ui and /metrics need credentials (401 without),
// /healthz/live does not; b's token lists only b's spans on /ui, a's span page is 404 to it and
// /metrics 403. Every example config keeps the admin endpoint off the network.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { attrs } from './lib/otlp.mjs';
import { startHotspan } from './lib/hotspan.mjs';
import { startSink } from './lib/sink.mjs';
import { startPyroscopeSink, postIngest } from './lib/pyroscope_sink.mjs';
import { encodeProfile } from './lib/pprof.mjs';
import { parsePrometheus, metric } from './lib/metrics.mjs';
import { request } from './lib/http.mjs';
import { makeProvider, exportSpans } from './lib/sdk.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const TOKEN_A = 'tenant-a-token-5f1e2d';
const TOKEN_B = 'tenant-b-token-9c8b7a';
const OPS = 'operator-token-314159';
const A_FNS = /tenantA\./;
const B_FNS = /tenantB\./;

/** An OTLP AnyValue (decoded) as a plain JS value. */
/** Everything hotspan wrote on a span, as one string (to search for function names). */
const annotations = (a) => JSON.stringify(Object.fromEntries(
  Object.entries(a).filter(([k]) => /^(profile\.|hotspan\.|pyroscope\.)/.test(k))));

const nowS = () => Math.floor(Date.now() / 1000);

/** POST /ingest a CPU profile of user-db over the last 30 s (to 5 s ago) with these stacks. */
function ingest(port, token, stacks, { service = 'user-db', headers = {}, nameLabels = '' } = {}) {
  const from = nowS() - 30;
  const until = nowS() - 5;
  const body = encodeProfile({
    samples: stacks.map(([stack, n]) => ({ stack, values: [n, n * 10000000] })),
    timeNanos: BigInt(from) * 1000000000n,
    durationNanos: BigInt(until - from) * 1000000000n,
  });
  return postIngest(port, {
    query: { name: `${service}.cpu{service_name=${service}${nameLabels}}`, from: String(from),
      until: String(until), format: 'pprof', spyName: 'gospy', sampleRate: '100' },
    body,
    headers: { authorization: `Bearer ${token}`, ...headers },
  });
}

/** Spans of `service` with resource attribute tenant.id=`claim`, made and exported by the
 * OpenTelemetry JS SDK with `token`: [name, durationMs] each, ending 14 s ago (inside the
 * profiles' window, whose end is past end + slack: annotated at once). Returns their ids. */
async function sendSpans(port, token, { service = 'user-db', claim, spans }) {
  const { provider, memory } = makeProvider({ service, extra: claim ? { 'tenant.id': claim } : {} });
  const tracer = provider.getTracer('it.hostile');
  const end = Date.now() - 14000;
  for (const [name, ms] of spans) tracer.startSpan(name, { startTime: end - ms }).end(end);
  const finished = memory.getFinishedSpans().slice();
  await exportSpans(finished, { url: `http://127.0.0.1:${port}/v1/traces`,
    headers: { authorization: `Bearer ${token}` } });
  await provider.shutdown();
  return Object.fromEntries(finished.map((s) => [s.name, s.spanContext().spanId]));
}

/** GET on the admin port with an optional bearer token. */
const adminGet = (port, path, token = null) => request({ port, method: 'GET', path,
  headers: token ? { authorization: `Bearer ${token}` } : {} });

describe('hostile tenant: the authenticated tenant always wins', () => {
  let sink;
  let psink;
  let hs;
  const ids = {}; // span name -> span id (hex)

  before(async () => {
    sink = await startSink();
    psink = await startPyroscopeSink();
    const tenants = `{a: ${TOKEN_A}, b: ${TOKEN_B}}`;
    hs = await startHotspan(`receivers:
  otlp:
    protocols: {http: {endpoint: 127.0.0.1:0}}
    auth: {tenants: ${tenants}}
  pyroscope:
    endpoint: 127.0.0.1:0
    auth: {tenants: ${tenants}}
processors:
  correlator:
    slow: {threshold: 300ms}
    max_wait: 2s
    first_profile_wait: 2s # b never sends profiles of ledger: its spans need not wait long
    labels: {trace_tenant: tenant.id}
  batch: {timeout: 50ms}
exporters:
  otlp: {endpoint: http://127.0.0.1:${sink.port}}
  pyroscope: {endpoint: http://127.0.0.1:${psink.port}}
service:
  telemetry:
    admin: 127.0.0.1:0
    admin_auth:
      bearer_token: {token: ${OPS}}
      tenants: ${tenants}
  pipelines:
    traces: {receivers: [otlp], processors: [correlator, batch], exporters: [otlp]}
    profiles: {receivers: [pyroscope], processors: [correlator], exporters: [pyroscope]}
`, { waitFor: ['otlp', 'pyroscope', 'admin'] });
  });

  after(async () => {
    if (hs) {
      const r = await hs.stop();
      assert.equal(r.code, 0, `hotspan exit code on SIGTERM\n${r.logs.slice(-30).join('\n')}`);
    }
    if (sink) await sink.stop();
    if (psink) await psink.stop();
  });

  it('b naming tenant a gets b\'s functions or none, under b; a loses nothing', async () => {
    // tenant a's profiles of user-db and of a service only a has; b's own user-db profile
    let r = await ingest(hs.ports.pyroscope, TOKEN_A, [
      [['main', 'tenantA.serve', 'tenantA.chargeCard'], 60],
      [['main', 'tenantA.serve', 'tenantA.loadCardVault'], 40]]);
    assert.equal(r.status, 200, String(r.body));
    r = await ingest(hs.ports.pyroscope, TOKEN_A, [[['main', 'tenantA.ledger'], 50]],
      { service: 'ledger' });
    assert.equal(r.status, 200, String(r.body));
    r = await ingest(hs.ports.pyroscope, TOKEN_B, [
      [['main', 'tenantB.scanOrders'], 80], [['main', 'tenantB.idle'], 20]]);
    assert.equal(r.status, 200, String(r.body));
    // b tries the profile side: another tenant's header and a tenant label, heavy samples
    r = await ingest(hs.ports.pyroscope, TOKEN_B, [[['main', 'tenantB.poison'], 100000]],
      { headers: { 'x-scope-orgid': 'a' }, nameLabels: ',tenant=a,tenant_id=a' });
    assert.equal(r.status, 200, String(r.body));
    const profiles = await psink.waitForProfiles(4);
    const byTenant = (t) => profiles.filter((p) => p.tenant === t).length;
    assert.equal(byTenant('a'), 2, 'a\'s two profiles go out as a\'s');
    assert.equal(byTenant('b'), 2, 'b\'s profiles (the one claiming a too) go out as b\'s');

    // a good client of tenant a keeps sending (a slow span and two fast ones a request) while
    // b attacks; everything of a's must arrive, annotated from a's profiles only
    let stop = false;
    const sentA = [];
    const good = (async () => {
      for (let i = 0; !stop || i < 3; i++) {
        const got = await sendSpans(hs.ports.otlp, TOKEN_A, { claim: 'a',
          spans: [[`a-slow-${i}`, 600], [`a-fast-${i}-0`, 5], [`a-fast-${i}-1`, 5]] });
        sentA.push(...Object.keys(got));
        Object.assign(ids, got);
      }
    })();
    try {
      Object.assign(ids, await sendSpans(hs.ports.otlp, TOKEN_B, { claim: 'a',
        spans: [['b-claims-a', 600], ['b-fast', 5]] }));
      Object.assign(ids, await sendSpans(hs.ports.otlp, TOKEN_B, { claim: 'a', service: 'ledger',
        spans: [['b-claims-a-ledger', 600]] }));
      Object.assign(ids, await sendSpans(hs.ports.otlp, TOKEN_B, { claim: 'b',
        spans: [['b-own', 600]] }));
    } finally {
      stop = true;
      await good;
    }

    const want = [...sentA, 'b-claims-a', 'b-fast', 'b-claims-a-ledger', 'b-own'];
    const arrived = () => new Set(sink.spans().map((s) => s.span.name));
    await sink.waitFor(() => want.every((n) => arrived().has(n)), 15000,
      () => `missing: ${want.filter((n) => !arrived().has(n)).join(', ')}`);
    const out = new Map();
    for (const s of sink.spans()) {
      const req = sink.requests[s.request];
      assert.ok(!out.has(s.span.name), `${s.span.name} delivered twice`);
      out.set(s.span.name, { a: attrs(s.span), tenant: req.headers['x-scope-orgid'] });
    }

    // b's spans: under b, never a's functions
    for (const name of ['b-claims-a', 'b-fast', 'b-claims-a-ledger', 'b-own']) {
      const { a, tenant } = out.get(name);
      assert.equal(tenant, 'b', `${name} exported under X-Scope-OrgID ${tenant}`);
      assert.doesNotMatch(annotations(a), A_FNS, `${name} was told tenant a's functions`);
    }
    let { a } = out.get('b-claims-a');
    assert.equal(a['profile.match'], 'window', annotations(a));
    // from b's own index (where b's poison went too: b's data, for b's spans only)
    assert.ok(a['profile.top_functions'].some((f) => B_FNS.test(f)), annotations(a));
    ({ a } = out.get('b-claims-a-ledger')); // only a profiles `ledger`: nothing for b
    assert.equal(a['profile.match'], 'none', annotations(a));
    assert.equal(a['profile.match_reason'], 'no_profiles_for_service');
    ({ a } = out.get('b-own'));
    assert.ok(a['profile.top_functions'].some((f) => /tenantB\./.test(f)), annotations(a));

    // a's spans: all there, under a, annotated from a's profiles only
    for (const name of sentA) {
      const got = out.get(name);
      assert.equal(got.tenant, 'a', `${name} exported under ${got.tenant}`);
      assert.doesNotMatch(annotations(got.a), B_FNS, `${name} was told tenant b's functions`);
      if (name.startsWith('a-slow-')) {
        assert.ok(got.a['profile.top_functions'].some((f) => /tenantA\.chargeCard/.test(f)),
          annotations(got.a));
      } else {
        assert.equal(annotations(got.a), '{}', `${name} is fast: untouched`);
      }
    }

    // counted: the two slow and the fast span of b that named a (every span is checked)
    const m = parsePrometheus((await adminGet(hs.ports.admin, '/metrics', OPS)).body.toString());
    assert.equal(metric(m, 'hotspan_correlator_tenant_mismatch_total', { processor: 'correlator' }), 3);
    await hs.waitForLog(/names tenant \\"a\\" in tenant\.id: annotated from tenant \\"b\\"'s profiles only/);
  });

  it('/ui and /metrics need credentials; b\'s token sees b\'s spans only', async () => {
    const port = hs.ports.admin;
    assert.ok(ids['a-slow-0'] && ids['b-claims-a'], 'the first test sent the spans');
    // probes: open
    let r = await adminGet(port, '/healthz/live');
    assert.equal(r.status, 200);
    r = await adminGet(port, '/healthz/ready');
    assert.equal(r.status, 200);
    // the rest: 401 with a challenge, without credentials or with a wrong one
    for (const path of ['/ui', '/metrics', `/ui/span/${ids['a-slow-0']}`]) {
      r = await adminGet(port, path);
      assert.equal(r.status, 401, path);
      assert.match(r.headers['www-authenticate'], /^Bearer realm="hotspan"/);
      assert.match(String(r.body), /missing credentials/);
      assert.doesNotMatch(String(r.body), A_FNS);
    }
    r = await adminGet(port, '/ui', 'not-a-token');
    assert.equal(r.status, 401);
    assert.match(r.headers['www-authenticate'], /error="invalid_token"/);

    // tenant b's token: its list, its pages; a's span is not found, a's list forbidden
    r = await adminGet(port, '/ui', TOKEN_B);
    assert.equal(r.status, 200);
    let html = String(r.body);
    assert.match(html, /b-claims-a/);
    assert.match(html, /b-own/);
    assert.doesNotMatch(html, /a-slow-/);
    assert.doesNotMatch(html, A_FNS);
    assert.doesNotMatch(html, /tenant=a/);
    r = await adminGet(port, `/ui/span/${ids['a-slow-0']}`, TOKEN_B);
    assert.equal(r.status, 404);
    assert.doesNotMatch(String(r.body), A_FNS);
    r = await adminGet(port, `/ui/span/${ids['a-slow-0']}?tenant=a`, TOKEN_B);
    assert.equal(r.status, 403);
    r = await adminGet(port, '/ui?tenant=a', TOKEN_B);
    assert.equal(r.status, 403);
    r = await adminGet(port, '/ui?tenant=%62', TOKEN_B); // its own name, %-escaped
    assert.equal(r.status, 200);
    assert.match(String(r.body), /b-own/);
    r = await adminGet(port, '/ui?tenant=%6', TOKEN_B);
    assert.equal(r.status, 400);
    r = await adminGet(port, `/ui/span/${ids['b-claims-a']}`, TOKEN_B);
    assert.equal(r.status, 200);
    assert.match(String(r.body), /tenantB\.scanOrders/);
    assert.doesNotMatch(String(r.body), A_FNS);
    r = await adminGet(port, '/metrics', TOKEN_B);
    assert.equal(r.status, 403);
    assert.match(String(r.body), /tenant "b"/);

    // tenant a's token sees its own span; the operator chooses the tenant
    r = await adminGet(port, `/ui/span/${ids['a-slow-0']}`, TOKEN_A);
    assert.equal(r.status, 200);
    assert.match(String(r.body), /tenantA\.chargeCard/);
    r = await adminGet(port, '/ui?tenant=a', OPS);
    assert.equal(r.status, 200);
    html = String(r.body);
    assert.match(html, /a-slow-0/);
    assert.doesNotMatch(html, /b-claims-a/);
    assert.match(html, /href="\/ui\?tenant=b"/);

    // every refusal counted under the admin endpoint
    const m = parsePrometheus((await adminGet(port, '/metrics', OPS)).body.toString());
    assert.ok(metric(m, 'hotspan_receiver_auth_failures_total', { receiver: 'admin', reason: 'missing' }) >= 3);
    assert.ok(metric(m, 'hotspan_receiver_auth_failures_total', { receiver: 'admin', reason: 'invalid' }) >= 1);
  });

  it('every example config keeps the admin endpoint off the network', () => {
    const dir = join(here, '../../config/examples');
    const files = readdirSync(dir).filter((f) => f.endsWith('.yaml'))
      .map((f) => join(dir, f)).concat(join(here, '../../config/default.yaml'));
    assert.ok(files.length >= 3, files.join(' '));
    for (const f of files) {
      const m = /^\s+admin:\s*(\S+)/m.exec(readFileSync(f, 'utf8'));
      assert.ok(m, `${f}: no service.telemetry.admin`);
      assert.match(m[1], /^(127\.|\[::1\]|localhost:)/, `${f}: admin on ${m[1]}`);
    }
    // the Grafana stack: inside its container, published on the host's loopback only
    const compose = readFileSync(join(dir, 'grafana/docker-compose.yaml'), 'utf8');
    assert.match(compose, /"127\.0\.0\.1:13133:13133"/);
    assert.doesNotMatch(compose, /"13133:13133"/);
  });
});
