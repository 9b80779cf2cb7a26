// TLS on every listener and exporter, through the real binary, with certificates made by
// lib/tls.mjs: OTLP/HTTP over TLS (node https, curl --http2 by ALPN) and OTLP/gRPC over TLS
// (the OpenTelemetry gRPC exporter, a raw grpc-js client) in; out over TLS with mTLS to an https
// sink and a grpc-js sink that both require our client certificate; the pyroscope receiver and
// exporter over TLS. Refusals (plain HTTP, no or wrong client cert, TLS 1.2 under min 1.3, an
// exporter with the wrong CA) while a good client keeps sending and loses nothing; SIGHUP
// reloads the server certificate for new connections only and keeps it when the new files
// are broken.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, writeFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import https from 'node:https';
import tls from 'node:tls';
import { gunzipSync } from 'node:zlib';
import grpc from '@grpc/grpc-js';
import { OTLPTraceExporter as GrpcExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { startHotspan, runHotspan, writeConfig } from './lib/hotspan.mjs';
import { fetchMetrics } from './lib/metrics.mjs';
import { makeSpans } from './lib/sdk.mjs';
import { request } from './lib/http.mjs';
import { encodeProfile } from './lib/pprof.mjs';
import { PUSH_PATH, decodePushRequest } from './lib/pyroscope_sink.mjs';
import { makeCerts } from './lib/tls.mjs';
import * as otlp from './lib/otlp.mjs';
import { waitFor } from './lib/wait.mjs';
import { startGrpcSink, EXPORT, raw } from './lib/grpc_sink.mjs';


/** An https backend that requires a client certificate from our CA: OTLP/HTTP and Push. */
async function startHttpsSink(c) {
  const traces = [];
  const pushes = [];
  const server = https.createServer({
    key: c.read(c.serverKey), cert: c.read(c.server), ca: [c.read(c.ca)],
    requestCert: true, rejectUnauthorized: true,
  }, (req, res) => {
    const chunks = [];
    req.on('data', (d) => chunks.push(d));
    req.on('end', () => {
      let body = Buffer.concat(chunks);
      if (req.headers['content-encoding'] === 'gzip') body = gunzipSync(body);
      const clientCn = req.socket.getPeerCertificate()?.subject?.CN;
      if (req.url === '/v1/traces') {
        traces.push({ headers: req.headers, clientCn,
          spans: otlp.flattenSpans(otlp.decodeTraceRequest(body)) });
        res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
      } else if (req.url === PUSH_PATH) {
        pushes.push({ clientCn, req: decodePushRequest(body) });
        res.writeHead(200, { 'content-type': 'application/proto' }).end();
      } else {
        res.writeHead(404).end();
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  return {
    port: server.address().port, traces, pushes,
    spans: (pred = () => true) => traces.filter((t) => pred(t.headers)).flatMap((t) => t.spans),
    stop: () => { server.closeAllConnections?.(); return new Promise((r) => server.close(r)); },
  };
}

/** A TraceService over TLS that also requires our client certificate. */
function startTlsGrpcSink(c) {
  return startGrpcSink(grpc.ServerCredentials.createSsl(c.read(c.ca),
    [{ cert_chain: c.read(c.server), private_key: c.read(c.serverKey) }], true));
}

/** POST over TLS; resolves {status, body, serial, socket}; rejects on a refused handshake. */
function tlsPost(port, body, { ca, cert, key, agent = false, maxVersion, path = '/v1/traces',
  headers = { 'content-type': 'application/x-protobuf' } } = {}) {
  return new Promise((resolve, reject) => {
    const req = https.request({ host: '127.0.0.1', port, method: 'POST', path, headers, agent,
      ca, cert, key, maxVersion, servername: 'localhost' }, (res) => {
      const chunks = [];
      const { socket } = res; // detached by the agent once the answer is read
      const serial = socket.getPeerCertificate().serialNumber;
      res.on('data', (d) => chunks.push(d));
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks),
        serial, socket }));
      res.on('error', reject);
    });
    req.setTimeout(10000, () => req.destroy(new Error('no answer within 10 s')));
    req.on('error', reject);
    req.end(body);
  });
}

function curl(args, stdin) {
  return new Promise((res, rej) => {
    const p = execFile('curl', args, (err, stdout, stderr) => (err ? rej(new Error(`${err.message}\n${stderr}`)) : res(stdout)));
    p.stdin.end(stdin);
  });
}

const normalize = (x) => ({ ...x, span: { ...x.span, status: x.span.status ?? { message: '', code: 0 } } });

describe('TLS on listeners and exporters', () => {
  let c;
  let sink;
  let gsink;
  let hs;
  let ports;
  let metricsPort;
  let viaHotspan = 0; // spans sent through the TLS receivers, to arrive at both sinks
  let live; // the otlp receiver's cert/key paths, replaced for the SIGHUP test
  let liveCli; // the otlp/https exporter's client cert/key paths, replaced too

  before(async () => {
    c = makeCerts();
    live = { cert: join(c.dir, 'live.pem'), key: join(c.dir, 'live.key') };
    copyFileSync(c.server, live.cert);
    copyFileSync(c.serverKey, live.key);
    liveCli = { cert: join(c.dir, 'liveclient.pem'), key: join(c.dir, 'liveclient.key') };
    copyFileSync(c.client, liveCli.cert);
    copyFileSync(c.clientKey, liveCli.key);
    sink = await startHttpsSink(c);
    gsink = await startTlsGrpcSink(c);
    const srv = `cert_file: ${c.server}, key_file: ${c.serverKey}`;
    const cli = `ca_file: ${c.ca}, cert_file: ${c.client}, key_file: ${c.clientKey}`;
    hs = await startHotspan(`receivers:
  otlp:
    protocols:
      http: {endpoint: 127.0.0.1:0, tls: {cert_file: ${live.cert}, key_file: ${live.key}}}
      grpc: {endpoint: 127.0.0.1:0, tls: {${srv}}}
  otlp/mtls:
    protocols:
      http: {endpoint: 127.0.0.1:0, tls: {${srv}, client_ca_file: ${c.ca}}}
  otlp/v13:
    protocols:
      http: {endpoint: 127.0.0.1:0, tls: {${srv}, min_version: "1.3"}}
  otlp/plain:
    protocols:
      http: {endpoint: 127.0.0.1:0}
  pyroscope:
    endpoint: 127.0.0.1:0
    tls: {${srv}}
processors:
  batch: {timeout: 50ms, send_batch_size: 8192}
exporters:
  otlp/https:
    endpoint: https://127.0.0.1:${sink.port}
    tls: {ca_file: ${c.ca}, cert_file: ${liveCli.cert}, key_file: ${liveCli.key}}
    compression: gzip
    headers: {x-via: https}
  otlp/togrpc:
    protocol: grpc
    endpoint: 127.0.0.1:${gsink.port}
    tls: {${cli}}
    compression: gzip
    headers: {x-via: grpc}
  otlp/wrongca:
    endpoint: https://127.0.0.1:${sink.port}
    tls: {ca_file: ${c.otherCa}, cert_file: ${c.client}, key_file: ${c.clientKey}}
    headers: {x-via: wrongca}
    retry_on_failure: {initial_interval: 50ms, max_interval: 200ms, max_elapsed_time: 2s}
  otlp/skip:
    endpoint: https://127.0.0.1:${sink.port}
    tls: {insecure_skip_verify: true, cert_file: ${c.client}, key_file: ${c.clientKey}}
    headers: {x-via: skip}
  pyroscope:
    endpoint: https://127.0.0.1:${sink.port}
    tls: {${cli}}
service:
  telemetry:
    admin: 127.0.0.1:0
    log_level: info
  pipelines:
    traces: {receivers: [otlp, otlp/mtls, otlp/v13], processors: [batch], exporters: [otlp/https, otlp/togrpc]}
    traces/bad: {receivers: [otlp/plain], exporters: [otlp/wrongca, otlp/skip]}
    profiles: {receivers: [pyroscope], exporters: [pyroscope]}
`, { waitFor: ['otlp', 'otlp/grpc', 'otlp/mtls', 'otlp/v13', 'otlp/plain', 'pyroscope', 'admin'] });
    ports = hs.ports;
    metricsPort = ports.admin;
  });

  after(async () => {
    if (hs) {
      const r = await hs.stop();
      assert.equal(r.code, 0, `hotspan exit code on SIGTERM\n${r.logs.join('\n')}`);
    }
    if (sink) await sink.stop();
    if (gsink) await gsink.stop();
    c?.cleanup();
  });

  const ca = () => c.read(c.ca);

  /** Sends through `port` over TLS; returns the span ids. */
  async function sendTls(port, name, opts = {}) {
    const spans = [otlp.makeSpan({ name })];
    const r = await tlsPost(port, otlp.encodeRequest(spans), { ca: ca(), ...opts });
    assert.equal(r.status, 200, r.body.toString());
    viaHotspan += 1;
    return spans;
  }

  it('OTLP/HTTP over TLS in, mTLS out to https and gRPC sinks: spans identical, counted', async () => {
    const { spans } = makeSpans({ traces: 3, childrenPerTrace: 3, tag: 'https-in' });
    // the SDK's spans as protobuf, once through hotspan and once straight to the sink
    const body = otlp.encodeRequest(spans.map((s) => otlp.makeSpan({
      name: s.name, traceId: s.spanContext().traceId, spanId: s.spanContext().spanId })));
    const ids = new Set(spans.map((s) => s.spanContext().spanId));
    const r = await tlsPost(ports.otlp, body, { ca: ca() });
    assert.equal(r.status, 200);
    viaHotspan += spans.length;
    const direct = await tlsPost(sink.port, body, { ca: ca(), cert: c.read(c.client),
      key: c.read(c.clientKey), headers: { 'content-type': 'application/x-protobuf', 'x-direct': '1' } });
    assert.equal(direct.status, 200);
    const through = () => sink.spans((h) => h['x-via'] === 'https').filter((s) => ids.has(s.span.spanId));
    await waitFor(() => through().length >= spans.length, 10000, () => `${through().length}/${spans.length}`);
    const twins = new Map(sink.spans((h) => h['x-direct']).map((s) => [s.span.spanId, s]));
    assert.equal(through().length, spans.length, 'each span once');
    for (const s of through()) assert.deepEqual(s, twins.get(s.span.spanId));
    // hotspan presented our client certificate
    assert.ok(sink.traces.some((t) => t.headers['x-via'] === 'https' && t.clientCn === 'hotspan-test-client'));
    // and over gRPC with TLS + client cert too
    const g = () => gsink.spans((m) => m['x-via'] === 'grpc').filter((s) => ids.has(s.span.spanId));
    await waitFor(() => g().length >= spans.length, 10000, () => `grpc ${g().length}/${spans.length}`);
    for (const s of g()) assert.deepEqual(normalize(s), normalize(twins.get(s.span.spanId)));
  });

  it('OTLP/gRPC over TLS: the SDK exporter and a raw grpc-js client, gzip both ways', async () => {
    for (const compression of ['none', 'gzip']) {
      const { spans } = makeSpans({ traces: 3, childrenPerTrace: 2, tag: `grpc-tls-${compression}` });
      const ids = new Set(spans.map((s) => s.spanContext().spanId));
      const send = (url, creds, metadata) => {
        const exporter = new GrpcExporter({ url, compression, credentials: creds, metadata,
          timeoutMillis: 10000 });
        return new Promise((resolve, reject) => exporter.export(spans, (r) => (r.code === 0
          ? resolve() : reject(r.error || new Error(`code ${r.code}`))))).finally(() => exporter.shutdown());
      };
      await send(`https://127.0.0.1:${ports['otlp/grpc']}`, grpc.credentials.createSsl(ca()));
      viaHotspan += spans.length;
      const md = new grpc.Metadata();
      md.set('x-direct', compression);
      await send(`https://127.0.0.1:${gsink.port}`,
        grpc.credentials.createSsl(ca(), c.read(c.clientKey), c.read(c.client)), md);
      const through = () => gsink.spans((m) => m['x-via'] === 'grpc').filter((s) => ids.has(s.span.spanId));
      await waitFor(() => through().length >= spans.length, 10000, () => `${through().length}/${spans.length}`);
      const twins = new Map(gsink.spans((m) => m['x-direct'] === compression).map((s) => [s.span.spanId, s]));
      assert.equal(through().length, spans.length);
      for (const s of through()) assert.deepEqual(normalize(s), normalize(twins.get(s.span.spanId)));
    }
    // a raw grpc-js client with ssl credentials, gzip on
    const client = new grpc.Client(`127.0.0.1:${ports['otlp/grpc']}`, grpc.credentials.createSsl(ca()),
      { 'grpc.default_compression_algorithm': 2, 'grpc.ssl_target_name_override': 'localhost' });
    const span = otlp.makeSpan({ name: 'raw-grpc-tls' });
    const code = await new Promise((resolve) => client.makeUnaryRequest(EXPORT, raw.serialize,
      raw.deserialize, otlp.encodeRequest([span]), new grpc.Metadata(), { deadline: Date.now() + 10000 },
      (err) => { client.close(); resolve(err ? err.code : 0); }));
    assert.equal(code, 0);
    viaHotspan += 1;
    await waitFor(() => gsink.spans().some((s) => s.span.name === 'raw-grpc-tls'), 10000, () => 'raw-grpc-tls');
  });

  it('curl --http2 over TLS uses h2 by ALPN; curl over TLS reaches the pyroscope receiver', async () => {
    const out = await curl(['-sS', '--http2', '--cacert', c.ca, '-o', '/dev/null', '-w',
      '%{http_version} %{http_code}', '-H', 'content-type: application/x-protobuf', '--data-binary', '@-',
      `https://127.0.0.1:${ports.otlp}/v1/traces`], otlp.encodeRequest([otlp.makeSpan({ name: 'curl-h2-tls' })]));
    assert.equal(out, '2 200');
    viaHotspan += 1;
    const prof = encodeProfile({ samples: [{ stack: ['main', 'work'], values: [1, 10000000] }] });
    const py = await curl(['-sS', '--http2', '--cacert', c.ca, '-o', join(c.dir, 'py.out'), '-w',
      '%{http_version} %{http_code}', '--data-binary', '@-',
      `https://127.0.0.1:${ports.pyroscope}/ingest?name=tlsapp.cpu&format=pprof&from=1&until=2`], prof);
    assert.equal(py, '2 200', readFileSync(join(c.dir, 'py.out'), 'utf8'));
    // forwarded byte for byte by the pyroscope exporter over mTLS
    await waitFor(() => sink.pushes.length > 0, 10000, () => 'no push at the https sink');
    const rawProfile = sink.pushes[0].req[0].samples[0].raw;
    assert.ok(rawProfile.equals(prof), 'profile bytes unchanged');
    assert.equal(sink.pushes[0].clientCn, 'hotspan-test-client');
  });

  it('refusals are counted while a good client keeps sending and loses nothing', async () => {
    let good = 0;
    let stop = false;
    const goodNames = [];
    const goodLoop = (async () => {
      while (!stop) {
        const name = `good-${good}`;
        await sendTls(ports.otlp, name);
        goodNames.push(name);
        good += 1;
      }
    })();
    // plain HTTP to a TLS port: a plain-HTTP 400 that says so
    const plain = await request({ port: ports.otlp, body: 'x', headers: { 'content-type': 'application/x-protobuf' } });
    assert.equal(plain.status, 400);
    assert.match(plain.body.toString(), /this port speaks TLS \(client sent plain HTTP\)/);
    // mTLS: no client cert, a cert from the wrong CA
    await assert.rejects(tlsPost(ports['otlp/mtls'], 'x', { ca: ca() }));
    await assert.rejects(tlsPost(ports['otlp/mtls'], 'x', { ca: ca(), cert: c.read(c.wrongClient),
      key: c.read(c.wrongClientKey) }));
    await sendTls(ports['otlp/mtls'], 'mtls-ok', { cert: c.read(c.client), key: c.read(c.clientKey) });
    // TLS 1.2 against min_version 1.3
    await assert.rejects(tlsPost(ports['otlp/v13'], 'x', { ca: ca(), maxVersion: 'TLSv1.2' }));
    await sendTls(ports['otlp/v13'], 'v13-ok');
    await waitFor(() => good >= 5, 10000, () => `${good} good requests`);
    stop = true;
    await goodLoop;
    await waitFor(() => goodNames.every((n) => sink.spans((h) => h['x-via'] === 'https').some((s) => s.span.name === n)),
      10000, () => 'good spans missing at the sink');
    const m = await fetchMetrics(metricsPort);
    const f = (server, reason) => m[`hotspan_http_tls_handshake_failures_total{reason="${reason}",server="${server}"}`] ?? 0;
    assert.equal(f('otlp', 'plaintext'), 1);
    assert.ok(f('otlp/mtls', 'no_client_cert') >= 1, JSON.stringify(m));
    assert.ok(f('otlp/mtls', 'bad_client_cert') >= 1, JSON.stringify(m));
    assert.ok(f('otlp/v13', 'version') >= 1, JSON.stringify(m));
    await hs.waitForLog(/TLS refused \(no_client_cert\)/);
  });

  it('an exporter with the wrong CA fails and retries; insecure_skip_verify delivers', async () => {
    const r = await request({ port: ports['otlp/plain'], body: otlp.encodeRequest([otlp.makeSpan({ name: 'via-plain' })]),
      headers: { 'content-type': 'application/x-protobuf' } });
    assert.equal(r.status, 200);
    await waitFor(() => sink.spans((h) => h['x-via'] === 'skip').some((s) => s.span.name === 'via-plain'),
      10000, () => 'skip-verify exporter did not deliver');
    let retries = 0;
    for (let i = 0; i < 200 && retries < 2; i++) {
      retries = (await fetchMetrics(metricsPort))['hotspan_exporter_retries_total{exporter="otlp/wrongca"}'] ?? 0;
      if (retries < 2) await new Promise((x) => setTimeout(x, 50));
    }
    assert.ok(retries >= 2, `wrong-CA exporter retried ${retries} times`);
    assert.equal(sink.spans((h) => h['x-via'] === 'wrongca').length, 0, 'nothing delivered with the wrong CA');
    await hs.waitForLog(/otlp\/wrongca.*(certificate|SSL)/i);
  });

  it('SIGHUP: new connections get the new certificate, open ones keep theirs; broken files are refused', async () => {
    const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
    const first = await tlsPost(ports.otlp, otlp.encodeRequest([otlp.makeSpan({ name: 'hup-1' })]), { ca: ca(), agent });
    viaHotspan += 1;
    const oldSerial = first.serial;
    const cnOf = (name) => sink.traces.find((t) => t.headers['x-via'] === 'https' &&
      t.spans.some((x) => x.span.name === name))?.clientCn;
    await waitFor(() => cnOf('hup-1'), 10000, () => 'hup-1 not at the https sink'); // sent before
    const next = c.issueServer('server2', 'hotspan-test-server-2');
    copyFileSync(next.cert, live.cert);
    copyFileSync(next.key, live.key);
    // the exporter's client certificate is replaced at the same time
    const nextCli = c.issueClient('client2', 'hotspan-test-client-2');
    copyFileSync(nextCli.cert, liveCli.cert);
    copyFileSync(nextCli.key, liveCli.key);
    const reloads = hs.logs.filter((l) => /TLS files reloaded/.test(l) && /component=otlp /.test(l)).length;
    hs.proc.kill('SIGHUP');
    await waitFor(() => hs.logs.filter((l) => /TLS files reloaded/.test(l) && /component=otlp /.test(l)).length > reloads,
      10000, () => 'no reload log');
    const fresh = await tlsPost(ports.otlp, otlp.encodeRequest([otlp.makeSpan({ name: 'hup-2' })]), { ca: ca() });
    viaHotspan += 1;
    assert.notEqual(fresh.serial, oldSerial);
    assert.equal(parseInt(fresh.serial, 16), next.serial);
    // the exporter connected anew with the new client certificate (its pooled connection was
    // made with the old one)
    await waitFor(() => cnOf('hup-2'), 10000, () => 'hup-2 not at the https sink');
    assert.equal(cnOf('hup-1'), 'hotspan-test-client');
    assert.equal(cnOf('hup-2'), 'hotspan-test-client-2');
    // the kept-alive connection is the same socket and still shows the old certificate
    const again = await tlsPost(ports.otlp, otlp.encodeRequest([otlp.makeSpan({ name: 'hup-3' })]), { ca: ca(), agent });
    viaHotspan += 1;
    assert.equal(again.status, 200);
    assert.equal(again.socket, first.socket, 'the open connection was reused');
    assert.equal(again.serial, oldSerial);
    agent.destroy();
    // a broken replacement: a key that is not the certificate's
    writeFileSync(live.key, readFileSync(c.clientKey));
    hs.proc.kill('SIGHUP');
    await hs.waitForLog(/TLS reload failed.*live\.key/);
    const after = await tlsPost(ports.otlp, otlp.encodeRequest([otlp.makeSpan({ name: 'hup-4' })]), { ca: ca() });
    viaHotspan += 1;
    assert.equal(parseInt(after.serial, 16), next.serial, 'the last good certificate stays');
  });

  it('counters agree: every span through the TLS receivers reached both sinks', async () => {
    const https_ = () => sink.spans((h) => h['x-via'] === 'https').length;
    const grpc_ = () => gsink.spans((m) => m['x-via'] === 'grpc').length;
    await waitFor(() => https_() >= viaHotspan && grpc_() >= viaHotspan, 10000,
      () => `https ${https_()} grpc ${grpc_()} of ${viaHotspan}`);
    assert.equal(https_(), viaHotspan);
    assert.equal(grpc_(), viaHotspan);
    // the sink has the spans before hotspan has read its answer and counted them
    const sent = (m, e) => m[`hotspan_exporter_sent_spans_total{exporter="${e}"}`] ?? 0;
    const m = await waitFor(async () => {
      const mm = await fetchMetrics(metricsPort);
      return sent(mm, 'otlp/https') >= viaHotspan && sent(mm, 'otlp/togrpc') >= viaHotspan && mm;
    }, 10000, () => `sent counters below ${viaHotspan}`);
    assert.equal(m['hotspan_exporter_sent_spans_total{exporter="otlp/https"}'], viaHotspan);
    assert.equal(m['hotspan_exporter_sent_spans_total{exporter="otlp/togrpc"}'], viaHotspan);
  });
});

describe('TLS on the admin endpoint, and listener TLS files checked by validate', () => {
  let c;
  before(() => { c = makeCerts(); });
  after(() => c?.cleanup());

  it('service.telemetry.admin_tls: /healthz/live over TLS, plaintext refused', async () => {
    const hs = await startHotspan(`receivers:
  otlp: {protocols: {http: {endpoint: 127.0.0.1:0}}}
exporters:
  debug: {verbosity: basic}
service:
  telemetry:
    admin: 127.0.0.1:0
    admin_tls: {cert_file: ${c.server}, key_file: ${c.serverKey}}
  pipelines:
    traces: {receivers: [otlp], exporters: [debug]}
`);
    try {
      const out = await curl(['-sS', '--cacert', c.ca, '-w', ' %{http_code}',
        `https://127.0.0.1:${hs.ports.admin}/healthz/live`]);
      assert.match(out, / 200$/);
      const plain = await request({ port: hs.ports.admin, method: 'GET', path: '/healthz/live' });
      assert.equal(plain.status, 400);
      assert.match(plain.body.toString(), /this port speaks TLS/);
    } finally {
      const r = await hs.stop();
      assert.equal(r.code, 0, r.logs.join('\n'));
    }
  });

  it('a listener whose certificate file is missing is a positioned error from validate', async () => {
    const { file: path } = writeConfig(`receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:0
        tls: {cert_file: ${c.dir}/missing.pem, key_file: ${c.serverKey}}
  pyroscope:
    endpoint: 127.0.0.1:0
    tls: {cert_file: ${c.server}, key_file: ${c.dir}/missing.key}
exporters:
  debug: {}
service:
  telemetry: {admin_tls: {cert_file: ${c.dir}/nope.pem, key_file: ${c.serverKey}}}
  pipelines:
    traces: {receivers: [otlp], exporters: [debug]}
    profiles: {receivers: [pyroscope], exporters: [debug]}
`);
    const r = await runHotspan(['validate', '-c', path]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /hotspan\.yaml:6:\d+: receivers\.otlp\.protocols\.http: tls\.cert_file ".*missing\.pem": cannot load/);
    assert.match(r.stderr, /hotspan\.yaml:9:\d+: receivers\.pyroscope: tls\.key_file ".*missing\.key": cannot load/);
    assert.match(r.stderr, /hotspan\.yaml:13:\d+: service\.telemetry\.admin_tls: tls\.cert_file ".*nope\.pem": cannot load/);
  });
});
