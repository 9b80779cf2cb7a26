// Authentication on the receivers, through the real binary: missing, wrong and wrong-scheme
// credentials are refused on OTLP/HTTP (401, WWW-Authenticate, google.rpc.Status in the request's
// encoding), OTLP/gRPC (UNAUTHENTICATED) and the Pyroscope API (/ingest and Connect push: 401 with
// Connect JSON; push over gRPC: UNAUTHENTICATED), while a good client keeps sending and every one
// of its spans arrives. Per-tenant tokens decide X-Scope-OrgID (replacing what a client claims):
// each tenant's spans reach the sink under its own header, never two tenants in one request, and
// profiles carry their token's tenant; the tenant survives the correlator rewriting a batch. Token
// files rotate without a restart. Counters move. A stranger is refused by its headers, before its
// body is read: the 401 (or UNAUTHENTICATED) comes while an 8 MiB body is still unsent.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import grpc from '@grpc/grpc-js';
import { startHotspan } from './lib/hotspan.mjs';
import { startSink } from './lib/sink.mjs';
import { fetchMetrics, metric } from './lib/metrics.mjs';
import { postProto, request, rawExchange, parseRawResponse } from './lib/http.mjs';
import { makeSpans, exportSpans } from './lib/sdk.mjs';
import * as otlp from './lib/otlp.mjs';
import { startPyroscopeSink, postIngest, postPush, encodePushRequest, PUSH_PATH } from './lib/pyroscope_sink.mjs';
import { EXPORT, raw } from './lib/grpc_sink.mjs';
import { encodeProfile } from './lib/pprof.mjs';

const GOOD = 'good-token-0123456789';
const TEAM_A = 'team-a-token-abcdef';
const TEAM_B = 'team-b-token-ghijkl';

/** One unary gRPC call with `metadata`; resolves {code, details}. */
function grpcCall(port, path, body, metadata = {}) {
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(metadata)) md.set(k, v);
  return new Promise((resolve) => {
    client.makeUnaryRequest(path, raw.serialize, raw.deserialize, body, md,
      { deadline: Date.now() + 10000 }, (err) => {
        client.close();
        resolve({ code: err ? err.code : 0, details: err?.details });
      });
  });
}

const spansNamed = (prefix, n) => Array.from({ length: n }, (_, i) => otlp.makeSpan({ name: `${prefix}-${i}` }));
const profileBody = (svc) => encodePushRequest([{
  labels: { __name__: 'process_cpu', service_name: svc },
  samples: [{ raw: encodeProfile({ samples: [{ stack: ['main', 'work'], values: [1, 10000000] }] }) }],
}]);

describe('auth: bearer, basic and per-tenant tokens on every receiver', () => {
  let sink;
  let psink;
  let hs;
  let dir;
  let tenantsFile;

  before(async () => {
    sink = await startSink();
    psink = await startPyroscopeSink();
    dir = mkdtempSync(join(tmpdir(), 'hotspan-auth-'));
    tenantsFile = join(dir, 'tenants');
    writeFileSync(tenantsFile, `# tenant:token\nprof-a:prof-a-token-1\n`);
    hs = await startHotspan(`receivers:
  otlp:
    protocols:
      http: {endpoint: 127.0.0.1:0}
      grpc: {endpoint: 127.0.0.1:0}
    auth:
      bearer_token: {token: "\${env:HS_IT_GOOD_TOKEN}"}
      basic: {htpasswd: {inline: "alice:wonderland\\n"}}
      tenants: {team-a: "\${env:HS_IT_TEAM_A}", team-b: ${TEAM_B}}
  pyroscope:
    endpoint: 127.0.0.1:0
    auth:
      tenants_file: ${tenantsFile}
processors:
  # every span slow; these services send no profiles, so none waits for a first one
  correlator: {slow: {threshold: 1ms}, first_profile_wait: 0}
  batch: {timeout: 50ms, send_batch_size: 8192}
exporters:
  otlp:
    endpoint: http://127.0.0.1:${sink.port}
  pyroscope:
    endpoint: http://127.0.0.1:${psink.port}
service:
  telemetry:
    admin: 127.0.0.1:0
    log_level: info
  pipelines:
    traces: {receivers: [otlp], processors: [correlator, batch], exporters: [otlp]}
    profiles: {receivers: [pyroscope], exporters: [pyroscope]}
`, { waitFor: ['otlp', 'otlp/grpc', 'pyroscope', 'admin'],
      env: { HS_IT_GOOD_TOKEN: GOOD, HS_IT_TEAM_A: TEAM_A } });
  });

  after(async () => {
    if (hs) {
      const r = await hs.stop();
      assert.equal(r.code, 0, `hotspan exit code on SIGTERM\n${r.logs.join('\n')}`);
      for (const line of r.logs)
        for (const secret of [GOOD, TEAM_A, TEAM_B, 'wonderland', 'prof-a-token'])
          assert.ok(!line.includes(secret), `a credential in the log: ${line}`);
    }
    if (sink) await sink.stop();
    if (psink) await psink.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('refuses bad credentials on every protocol while a good client keeps flowing', async () => {
    const port = hs.ports.otlp;
    let stop = false;
    let sent = 0;
    const good = (async () => {
      for (let i = 0; !stop; i++) {
        const r = await postProto(port, otlp.encodeRequest(spansNamed(`good-${i}`, 3)),
          { authorization: `Bearer ${GOOD}` });
        assert.equal(r.status, 200, String(r.body));
        sent += 3;
        await new Promise((res) => setTimeout(res, 20));
      }
    })();
    try {
      const body = otlp.encodeRequest(spansNamed('bad', 2));
      // missing: 401, a Bearer and a Basic challenge, a google.rpc.Status in protobuf
      let r = await postProto(port, body);
      assert.equal(r.status, 401);
      assert.match(r.headers['www-authenticate'], /Bearer realm="hotspan"/);
      assert.match(r.headers['www-authenticate'], /Basic realm="hotspan"/);
      assert.equal(r.headers['content-type'], 'application/x-protobuf');
      let st = otlp.decodeRpcStatus(r.body);
      assert.equal(st.code, 16);
      assert.match(st.message, /missing credentials/);
      // wrong token
      r = await postProto(port, body, { authorization: 'Bearer not-the-token' });
      assert.equal(r.status, 401);
      assert.match(r.headers['www-authenticate'], /error="invalid_token"/);
      st = otlp.decodeRpcStatus(r.body);
      assert.equal(st.code, 16);
      assert.equal(st.message, 'invalid credentials');
      // a prefix and an extension of the right token are just as wrong
      for (const t of [GOOD.slice(0, -1), `${GOOD}x`]) {
        r = await postProto(port, body, { authorization: `Bearer ${t}` });
        assert.equal(r.status, 401);
      }
      // wrong basic password, as JSON: the Status comes back as JSON
      const basic = (up) => `Basic ${Buffer.from(up).toString('base64')}`;
      r = await request({ port, body: otlp.encodeRequestJson(spansNamed('bad-json', 1)),
        headers: { 'content-type': 'application/json', authorization: basic('alice:looking-glass') } });
      assert.equal(r.status, 401);
      assert.equal(r.headers['content-type'], 'application/json');
      assert.deepEqual(JSON.parse(r.body), { code: 16, message: 'invalid credentials' });
      // the right basic password passes
      r = await postProto(port, otlp.encodeRequest(spansNamed('basic-ok', 1)),
        { authorization: basic('alice:wonderland') });
      assert.equal(r.status, 200, String(r.body));
      // OTLP/gRPC: UNAUTHENTICATED without, with a wrong and with a basic-scheme token
      const g = hs.ports['otlp/grpc'];
      for (const md of [{}, { authorization: 'Bearer nope' }, { authorization: 'Token x' }]) {
        const res = await grpcCall(g, EXPORT, body, md);
        assert.equal(res.code, grpc.status.UNAUTHENTICATED, JSON.stringify(md));
      }
      assert.equal((await grpcCall(g, EXPORT, otlp.encodeRequest(spansNamed('grpc-ok', 2)),
        { authorization: `Bearer ${GOOD}` })).code, 0);
      // Pyroscope: /ingest and Connect push are 401 with Connect's JSON error
      const p = hs.ports.pyroscope;
      const ing = await postIngest(p, { query: { name: 'svc.cpu{}' }, body: 'main;work 1\n',
        contentType: 'text/plain', headers: { authorization: 'Bearer nope' } });
      assert.equal(ing.status, 401);
      assert.equal(ing.json.code, 'unauthenticated');
      assert.match(ing.headers['www-authenticate'], /^Bearer realm="hotspan"/);
      const push = await postPush(p, profileBody('it-auth-none'));
      assert.equal(push.status, 401);
      assert.deepEqual(push.json, { code: 'unauthenticated',
        message: 'missing credentials: send an Authorization header' });
      // push over gRPC (h2c on the same port)
      assert.equal((await grpcCall(p, PUSH_PATH, profileBody('it-auth-grpc'), {})).code,
        grpc.status.UNAUTHENTICATED);
    } finally {
      stop = true;
      await good;
    }
    // every good span arrived, and none of the refused ones
    await sink.waitFor(() => sink.spans().filter((s) => s.span.name.startsWith('good-')).length >= sent,
      10000, () => `good spans: ${sink.spans().filter((s) => s.span.name.startsWith('good-')).length}/${sent}`);
    const names = sink.spans().map((s) => s.span.name);
    assert.equal(names.filter((n) => n.startsWith('good-')).length, sent);
    assert.ok(sent >= 3);
    assert.ok(!names.some((n) => n.startsWith('bad')), 'a refused span reached the sink');
    await sink.waitFor(() => sink.spans().some((s) => s.span.name === 'grpc-ok-1'), 10000);
    assert.ok(names.includes('basic-ok-0') || sink.spans().some((s) => s.span.name === 'basic-ok-0'));
  });

  it('per-tenant tokens set X-Scope-OrgID, replacing the client\'s, one tenant per request', async () => {
    const port = hs.ports.otlp;
    const sends = [];
    for (let i = 0; i < 10; i++) {
      // team-a's client claims team-b: its token decides
      sends.push(postProto(port, otlp.encodeRequest(spansNamed(`ta-${i}`, 2)),
        { authorization: `Bearer ${TEAM_A}`, 'x-scope-orgid': 'team-b' }));
      sends.push(postProto(port, otlp.encodeRequest(spansNamed(`tb-${i}`, 2)),
        { authorization: `Bearer ${TEAM_B}` }));
      // the gateway token without a tenant keeps the client's header
      sends.push(postProto(port, otlp.encodeRequest(spansNamed(`tc-${i}`, 1)),
        { authorization: `Bearer ${GOOD}`, 'x-scope-orgid': 'team-c' }));
    }
    for (const r of await Promise.all(sends)) assert.equal(r.status, 200, String(r.body));
    // over gRPC too, as metadata
    assert.equal((await grpcCall(hs.ports['otlp/grpc'], EXPORT,
      otlp.encodeRequest(spansNamed('tg', 3)), { authorization: `Bearer ${TEAM_B}` })).code, 0);
    const want = { 'ta-': 'team-a', 'tb-': 'team-b', 'tc-': 'team-c', 'tg-': 'team-b' };
    const ours = () => sink.spans().filter((s) => Object.keys(want).some((p) => s.span.name.startsWith(p)));
    await sink.waitFor(() => ours().length >= 53, 10000, () => `tenant spans: ${ours().length}/53`);
    let requests = 0;
    for (const r of sink.accepted()) {
      const spans = r.decoded ? otlp.flattenSpans(r.decoded) : [];
      const tenants = new Set(spans.map((s) => {
        const p = Object.keys(want).find((k) => s.span.name.startsWith(k));
        return p ? want[p] : 'other';
      }));
      if (!spans.some((s) => Object.keys(want).some((p) => s.span.name.startsWith(p)))) continue;
      requests++;
      assert.equal(tenants.size, 1, `one request mixes tenants: ${[...tenants]}`);
      assert.equal(r.headers['x-scope-orgid'], [...tenants][0]);
    }
    assert.ok(requests >= 3);
    // a tenant id no backend would accept is refused, not forwarded
    const bad = await postProto(port, otlp.encodeRequest(spansNamed('bad-tenant', 1)),
      { authorization: `Bearer ${GOOD}`, 'x-scope-orgid': 'a/../b' });
    assert.equal(bad.status, 400);
    assert.match(otlp.decodeRpcStatus(bad.body).message, /X-Scope-OrgID: not a valid tenant id/);
    assert.equal(ours().length, 53, 'each span exactly once');
    // the correlator rewrote these batches (every span is slow at 1ms): the tenant survived
    for (const s of ours())
      assert.ok(s.span.attributes.some((a) => a.key === 'hotspan.slow'), `${s.span.name} not annotated`);
  });

  it('the OTel JS exporter sends with headers: {Authorization: "Bearer ..."}', async () => {
    const { spans } = makeSpans({ traces: 2, childrenPerTrace: 2, tag: 'sdk-auth' });
    const ids = new Set(spans.map((s) => s.spanContext().spanId));
    await exportSpans(spans, { url: `http://127.0.0.1:${hs.ports.otlp}/v1/traces`,
      headers: { Authorization: `Bearer ${TEAM_A}` } });
    await sink.waitFor(() => sink.spans().filter((s) => ids.has(s.span.spanId)).length >= spans.length,
      10000, () => 'sdk spans');
    const req = sink.accepted().find((r) => r.decoded && otlp.flattenSpans(r.decoded)
      .some((s) => ids.has(s.span.spanId)));
    assert.equal(req.headers['x-scope-orgid'], 'team-a');
    await assert.rejects(exportSpans(spans, { url: `http://127.0.0.1:${hs.ports.otlp}/v1/traces`,
      headers: { Authorization: 'Bearer wrong' } }));
  });

  it('profiles carry their token\'s tenant; the tenants file rotates without a restart', async () => {
    const p = hs.ports.pyroscope;
    let r = await postPush(p, profileBody('it-auth-prof-a'),
      { headers: { authorization: 'Bearer prof-a-token-1', 'x-scope-orgid': 'someone-else' } });
    assert.equal(r.status, 200, String(r.body));
    const [got] = await psink.waitForProfiles(1, { filter: (x) => x.labels?.service_name === 'it-auth-prof-a' });
    assert.equal(got.tenant, 'prof-a');
    r = await postIngest(p, { query: { name: 'it-auth-ingest.cpu{}' }, body: 'main;work 3\n',
      contentType: 'text/plain', headers: { authorization: 'Bearer prof-a-token-1' } });
    assert.equal(r.status, 200, String(r.body));
    // rotate: a new file (new inode, as secret mounts do); the old token stops working
    const tmp = `${tenantsFile}.new`;
    writeFileSync(tmp, 'prof-a:prof-a-token-2\nprof-b:prof-b-token-1\n');
    renameSync(tmp, tenantsFile);
    const deadline = Date.now() + 5000;
    for (;;) {
      r = await postPush(p, profileBody('it-auth-prof-b'), { headers: { authorization: 'Bearer prof-b-token-1' } });
      if (r.status === 200 || Date.now() > deadline) break;
      await new Promise((res) => setTimeout(res, 200));
    }
    assert.equal(r.status, 200, 'the new token works within the re-read interval');
    r = await postPush(p, profileBody('it-auth-old'), { headers: { authorization: 'Bearer prof-a-token-1' } });
    assert.equal(r.status, 401, 'the rotated-out token is refused');
    const [b] = await psink.waitForProfiles(1, { filter: (x) => x.labels?.service_name === 'it-auth-prof-b' });
    assert.equal(b.tenant, 'prof-b');
  });

  it('refuses a stranger by its headers, before its body is read', async () => {
    const port = hs.ports.otlp;
    const BIG = 8 << 20;
    // 8 MiB announced, 64 KiB sent, the rest never: a server that waited for the body would
    // say nothing until read_timeout (30 s); the answer comes now and the connection ends
    const head = (extra) => `POST /v1/traces HTTP/1.1\r\nHost: x\r\n` +
      `Content-Type: application/x-protobuf\r\nContent-Length: ${BIG}\r\n${extra}\r\n`;
    let x = await rawExchange(port, Buffer.concat([Buffer.from(head('')), Buffer.alloc(64 << 10, 7)]),
      { timeoutMs: 10000 });
    assert.ok(x.closed, 'the server ends the connection after an early answer');
    let res = parseRawResponse(x.data);
    assert.equal(res?.status, 401, x.data.toString('latin1').slice(0, 200));
    assert.equal(res.headers.connection, 'close');
    assert.match(x.data.toString('latin1'), /\r\nwww-authenticate: Bearer realm="hotspan"\r\n/i);
    assert.equal(otlp.decodeRpcStatus(res.body).code, 16);
    // Expect: 100-continue gets the 401 instead of the 100
    x = await rawExchange(port, head('Expect: 100-continue\r\n'), { timeoutMs: 10000 });
    res = parseRawResponse(x.data);
    assert.equal(res?.status, 401, x.data.toString('latin1').slice(0, 200));
    assert.ok(x.closed);
    // a wrong token, a whole 8 MiB body sent by an ordinary client: 401 as well
    const big = Buffer.alloc(BIG, 1);
    const r = await postProto(port, big, { authorization: 'Bearer nope' });
    assert.equal(r.status, 401);
    assert.equal(otlp.decodeRpcStatus(r.body).message, 'invalid credentials');
    // a bad tenant is refused by its headers too (400), with the Status as always
    x = await rawExchange(port, Buffer.from(head(`Authorization: Bearer ${GOOD}\r\n` +
      'X-Scope-OrgID: a/../b\r\n')), { timeoutMs: 10000 });
    res = parseRawResponse(x.data);
    assert.equal(res?.status, 400);
    assert.match(otlp.decodeRpcStatus(res.body).message, /X-Scope-OrgID/);

    // OTLP/gRPC: an 8 MiB message without a token is UNAUTHENTICATED, while a client with one,
    // on its own connection, delivers
    const g = hs.ports['otlp/grpc'];
    const [bad, good] = await Promise.all([
      grpcCall(g, EXPORT, big, {}),
      grpcCall(g, EXPORT, otlp.encodeRequest(spansNamed('early-ok', 2)), { authorization: `Bearer ${GOOD}` }),
    ]);
    assert.equal(bad.code, grpc.status.UNAUTHENTICATED, bad.details);
    assert.match(bad.details, /missing credentials/);
    assert.equal(good.code, 0, good.details);
    await sink.waitFor(() => sink.spans().some((s) => s.span.name === 'early-ok-1'), 10000);

    // Pyroscope: /ingest and Connect push with 8 MiB bodies (401, Connect's JSON), gRPC push
    // (UNAUTHENTICATED); and the partial body answered before the rest comes
    const p = hs.ports.pyroscope;
    const ing = await postIngest(p, { query: { name: 'svc.cpu{}' }, body: big,
      contentType: 'application/octet-stream' });
    assert.equal(ing.status, 401);
    assert.equal(ing.json.code, 'unauthenticated');
    const push = await postPush(p, big, { headers: { authorization: 'Bearer nope' } });
    assert.equal(push.status, 401);
    assert.deepEqual(push.json, { code: 'unauthenticated', message: 'invalid credentials' });
    x = await rawExchange(p, Buffer.concat([Buffer.from(`POST /ingest?name=svc.cpu HTTP/1.1\r\n` +
      `Host: x\r\nContent-Length: ${BIG}\r\n\r\n`), Buffer.alloc(64 << 10, 7)]), { timeoutMs: 10000 });
    res = parseRawResponse(x.data);
    assert.equal(res?.status, 401);
    assert.equal(JSON.parse(res.body.toString()).code, 'unauthenticated');
    assert.equal((await grpcCall(p, PUSH_PATH, big, {})).code, grpc.status.UNAUTHENTICATED);
  });

  it('counts refusals by receiver and reason in /metrics', async () => {
    const m = await fetchMetrics(hs.ports.admin);
    const c = (receiver, reason) => metric(m, 'hotspan_receiver_auth_failures_total', { receiver, reason }) ?? 0;
    assert.ok(c('otlp', 'missing') >= 2, `otlp missing ${c('otlp', 'missing')}`); // HTTP + gRPC
    assert.ok(c('otlp', 'invalid') >= 5, `otlp invalid ${c('otlp', 'invalid')}`);
    assert.ok(c('otlp', 'bad_scheme') >= 1);
    assert.ok(c('pyroscope', 'missing') >= 2);
    assert.ok(c('pyroscope', 'invalid') >= 2);
  });
});
