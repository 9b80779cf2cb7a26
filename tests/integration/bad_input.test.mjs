// Hostile and broken input at the OTLP/HTTP receiver while a good client keeps sending: each
// bad request gets the status the OTLP/HTTP spec (and otelcol) gives it, with a google.rpc.Status
// body where one is due; slow and oversized clients are cut off; the good client never sees
// anything but 200, every good span reaches the sink, and hotspan still answers at the end.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import http2 from 'node:http2';
import { gzipSync } from 'node:zlib';
import { startHotspan } from './lib/hotspan.mjs';
import { startSink } from './lib/sink.mjs';
import { request, postProto, rawExchange, parseRawResponse } from './lib/http.mjs';
import * as otlp from './lib/otlp.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function assertProtoStatus(res, what) {
  assert.match(String(res.headers['content-type']), /^application\/x-protobuf/,
    `${what}: content-type of the error body`);
  let st;
  try {
    st = otlp.decodeRpcStatus(res.body);
  } catch (e) {
    assert.fail(`${what}: body is not a google.rpc.Status (${e.message}): ${res.body.toString('hex')}`);
  }
  assert.ok(st.message && st.message.length > 0, `${what}: google.rpc.Status.message is empty`);
  return st;
}

describe('bad input at the OTLP/HTTP receiver', () => {
  let sink;
  let hs;
  let port;
  // the good client
  let goodRunning = false;
  let goodLoop;
  const good = { sent: [], statuses: [], errors: [] };

  before(async () => {
    sink = await startSink();
    hs = await startHotspan(`receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:0
        max_request_body_size: 1MiB
        read_timeout: 1s
processors:
  batch: {timeout: 50ms, send_batch_size: 8192}
exporters:
  otlp:
    endpoint: http://127.0.0.1:${sink.port}
service:
  telemetry:
    admin: 127.0.0.1:0
    log_level: info
  pipelines:
    traces: {receivers: [otlp], processors: [batch], exporters: [otlp]}
`);
    port = hs.ports.otlp;
    goodRunning = true;
    goodLoop = (async () => {
      let i = 0;
      while (goodRunning && i < 2000) {
        i += 1;
        const spans = [otlp.makeSpan({ name: `good-${i}` }), otlp.makeSpan({ name: `good-${i}b` })];
        const json = i % 3 === 0;
        try {
          const res = json
            ? await request({ port, body: otlp.encodeRequestJson(spans),
              headers: { 'content-type': 'application/json' } })
            : await postProto(port, otlp.encodeRequest(spans));
          good.statuses.push(res.status);
          if (res.status === 200) good.sent.push(...spans.map((s) => s.spanId));
          else good.errors.push(`good request ${i} answered ${res.status}: ${res.body}`);
        } catch (e) {
          good.errors.push(`good request ${i} failed: ${e.message}`);
        }
        await sleep(20);
      }
    })();
  });

  after(async () => {
    goodRunning = false;
    await goodLoop;
    if (hs) {
      const r = await hs.stop();
      assert.equal(r.code, 0, `hotspan exit code on SIGTERM\n${r.logs.slice(-30).join('\n')}`);
    }
    if (sink) await sink.stop();
  });

  it('malformed protobuf → 400 with a protobuf google.rpc.Status', async () => {
    const cases = {
      'length past the end': Buffer.from([0x0a, 0xff, 0xff, 0x03, 0x0a, 0x00]),
      'truncated varint': Buffer.from([0x0a, 0x80]),
      'invalid wire type 7': Buffer.from([0x0f, 0x00]),
      'span with truncated trace_id length': Buffer.from([0x0a, 0x06, 0x12, 0x04, 0x12, 0x02, 0x0a, 0x10]),
    };
    for (const [what, body] of Object.entries(cases)) {
      const res = await postProto(port, body);
      assert.equal(res.status, 400, `${what}: status`);
      assertProtoStatus(res, what);
    }
  });

  it('invalid JSON → 400 with a JSON Status object', async () => {
    for (const body of ['{"resourceSpans": [', 'not json at all', '{"resourceSpans": 12}']) {
      const res = await request({ port, body, headers: { 'content-type': 'application/json' } });
      assert.equal(res.status, 400, `${JSON.stringify(body)}: status`);
      assert.match(String(res.headers['content-type']), /^application\/json/, `${body}: content-type`);
      let st;
      try { st = JSON.parse(res.body.toString('utf8')); } catch (e) {
        assert.fail(`${body}: body is not JSON: ${res.body}`);
      }
      assert.equal(typeof st, 'object');
      assert.ok(typeof st.message === 'string' && st.message.length > 0, `${body}: Status.message: ${res.body}`);
    }
  });

  it('wrong or missing content type → 415', async () => {
    const body = otlp.encodeRequest([otlp.makeSpan()]);
    let res = await request({ port, body, headers: { 'content-type': 'text/plain' } });
    assert.equal(res.status, 415, 'text/plain');
    res = await request({ port, body, headers: {} });
    assert.equal(res.status, 415, 'no content-type');
  });

  it('GET /v1/traces → 405, POST /v1/nope → 404', async () => {
    let res = await request({ port, method: 'GET', path: '/v1/traces' });
    assert.equal(res.status, 405, 'GET /v1/traces');
    res = await postProto(port, otlp.encodeRequest([otlp.makeSpan()]), {}, '/v1/nope');
    assert.equal(res.status, 404, 'POST /v1/nope');
  });

  it('truncated gzip → 400', async () => {
    const gz = gzipSync(otlp.encodeRequest([otlp.makeSpan(), otlp.makeSpan()]));
    const res = await postProto(port, gz.subarray(0, Math.floor(gz.length / 2)),
      { 'content-encoding': 'gzip' });
    assert.equal(res.status, 400, 'truncated gzip');
    assertProtoStatus(res, 'truncated gzip');
  });

  it('gzip bomb past max_request_body_size (1MiB) → 413', async () => {
    // a valid-looking start, then 8 MiB of zeros: compresses to ~8 KiB
    const bomb = gzipSync(Buffer.concat([otlp.encodeRequest([otlp.makeSpan()]), Buffer.alloc(8 << 20)]));
    assert.ok(bomb.length < 16 * 1024, `bomb is ${bomb.length} bytes`);
    const res = await postProto(port, bomb, { 'content-encoding': 'gzip' });
    assert.equal(res.status, 413, 'gzip bomb');
  });

  it('Content-Length over the limit, headers only → 413 before any body is sent', async () => {
    const head = `POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\n` +
      'Content-Type: application/x-protobuf\r\nContent-Length: 5000000\r\n\r\n';
    const r = await rawExchange(port, head, { timeoutMs: 3000 });
    const res = parseRawResponse(r.data);
    assert.ok(res, `no HTTP response to an oversized Content-Length (got ${JSON.stringify(r.data.toString())})`);
    assert.equal(res.status, 413);
    assert.ok(r.firstByteMs !== null && r.firstByteMs < 900,
      `413 came after ${r.firstByteMs} ms: it must not wait for the body or the read timeout`);
    // an OTLP error like any other: a google.rpc.Status naming the limit, connection closed
    const st = assertProtoStatus(res, 'oversized Content-Length');
    assert.match(st.message, /max_request_body_size \(1048576 bytes\)/);
    assert.equal(res.headers.connection, 'close');
    // the same for a JSON request, in JSON
    const jr = parseRawResponse((await rawExchange(port, head.replace('x-protobuf', 'json'),
      { timeoutMs: 3000 })).data);
    assert.equal(jr.status, 413);
    assert.match(String(jr.headers['content-type']), /^application\/json/);
    assert.match(JSON.parse(jr.body.toString()).message, /max_request_body_size/);
    // over HTTP/2 (h2c), announced by content-length: answered before any DATA is read, then
    // the stream is reset with NO_ERROR (RFC 9113 §8.1). curl 7.88 reports that as error 92,
    // so Node's client asks.
    const h2 = await new Promise((resolve, reject) => {
      const sess = http2.connect(`http://127.0.0.1:${port}`);
      const body = Buffer.alloc(1100000, 0x20);
      const req = sess.request({ ':method': 'POST', ':path': '/v1/traces',
        'content-type': 'application/json', 'content-length': body.length });
      const got = { data: [] };
      req.on('response', (h) => { got.status = h[':status']; got.type = h['content-type']; });
      req.on('data', (d) => got.data.push(d));
      req.on('error', reject);
      req.on('close', () => { got.rst = req.rstCode; sess.close(); resolve(got); });
      req.end(body);
    });
    assert.equal(h2.status, 413);
    assert.match(h2.type, /^application\/json/);
    assert.match(JSON.parse(Buffer.concat(h2.data).toString()).message, /max_request_body_size/);
    assert.equal(h2.rst, http2.constants.NGHTTP2_NO_ERROR);
  });

  it('20 slowloris connections (a header byte every 200 ms) are cut off after read_timeout 1s', async () => {
    const line = 'POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n' +
      'X-Padding: ' + 'a'.repeat(200) + '\r\n';
    const one = () => new Promise((resolve) => {
      const t0 = Date.now();
      const chunks = [];
      let i = 0;
      let timer = null;
      let done = false;
      let connected = false;
      const sock = net.connect({ port, host: '127.0.0.1' });
      const finish = (how) => {
        if (done) return;
        done = true;
        clearInterval(timer);
        clearTimeout(guard);
        sock.destroy();
        resolve({ how, connected, ms: Date.now() - t0, data: Buffer.concat(chunks) });
      };
      const guard = setTimeout(() => finish('still open'), 6000);
      sock.on('connect', () => {
        connected = true;
        timer = setInterval(() => {
          if (i < line.length && !sock.destroyed) sock.write(line[i++]);
        }, 200);
      });
      sock.on('data', (c) => chunks.push(c));
      sock.on('end', () => finish('closed'));
      sock.on('close', () => finish('closed'));
      sock.on('error', () => finish('closed'));
    });
    const results = await Promise.all(Array.from({ length: 20 }, one));
    for (const [k, r] of results.entries()) {
      assert.ok(r.connected, `slowloris connection ${k} was not accepted`);
      assert.equal(r.how, 'closed', `slowloris connection ${k} was not closed within 6 s`);
      assert.ok(r.ms >= 800, `slowloris connection ${k} closed after ${r.ms} ms, before read_timeout 1s`);
      assert.ok(r.ms < 4000, `slowloris connection ${k} closed only after ${r.ms} ms (read_timeout 1s)`);
      if (r.data.length) {
        const res = parseRawResponse(r.data);
        assert.ok(res && res.status === 408, `slowloris connection ${k} got ${JSON.stringify(r.data.toString())}`);
      }
    }
  });

  it('edge cases that must work: empty body, media-type parameters, a body just under the limit (plain and gzip), chunked, pipelined', async () => {
    let res = await postProto(port, Buffer.alloc(0));
    assert.equal(res.status, 200, 'an empty request is a full success');
    const one = [otlp.makeSpan()];
    res = await request({ port, body: otlp.encodeRequest(one),
      headers: { 'content-type': 'application/x-protobuf; charset=utf-8' } });
    assert.equal(res.status, 200, 'application/x-protobuf; charset=utf-8');
    good.sent.push(...one.map((s) => s.spanId));

    // ~950 KiB of spans against max_request_body_size 1MiB
    const big = Array.from({ length: 2900 }, () => otlp.makeSpan({
      attributes: [{ key: 'pad', value: { stringValue: 'x'.repeat(250) } }] }));
    const bigBody = otlp.encodeRequest(big);
    assert.ok(bigBody.length > 900 * 1024 && bigBody.length < 1024 * 1024, `${bigBody.length}`);
    res = await postProto(port, bigBody);
    assert.equal(res.status, 200, `a ${bigBody.length}-byte body under the 1MiB limit`);
    good.sent.push(...big.map((s) => s.spanId));
    const big2 = big.map((s) => ({ ...s, spanId: otlp.hexId(8) }));
    res = await postProto(port, gzipSync(otlp.encodeRequest(big2)), { 'content-encoding': 'gzip' });
    assert.equal(res.status, 200, 'a gzip body expanding to just under the limit');
    good.sent.push(...big2.map((s) => s.spanId));

    // Transfer-Encoding: chunked, within and past the limit
    const chunkedHead = 'POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\n' +
      'Content-Type: application/x-protobuf\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n';
    const cs = [otlp.makeSpan(), otlp.makeSpan()];
    const cb = otlp.encodeRequest(cs);
    const half = Math.floor(cb.length / 2);
    const chunked = Buffer.concat([Buffer.from(chunkedHead),
      Buffer.from(`${half.toString(16)}\r\n`), cb.subarray(0, half), Buffer.from('\r\n'),
      Buffer.from(`${(cb.length - half).toString(16)}\r\n`), cb.subarray(half), Buffer.from('\r\n0\r\n\r\n')]);
    let raw = await rawExchange(port, chunked, { timeoutMs: 3000 });
    assert.equal(parseRawResponse(raw.data)?.status, 200, `chunked body: ${raw.data.toString().slice(0, 200)}`);
    good.sent.push(...cs.map((s) => s.spanId));
    const over = [Buffer.from(chunkedHead)];
    for (let i = 0; i < 20; i += 1) over.push(Buffer.from('10000\r\n'), Buffer.alloc(0x10000, 0x41), Buffer.from('\r\n'));
    over.push(Buffer.from('0\r\n\r\n'));
    raw = await rawExchange(port, Buffer.concat(over), { timeoutMs: 3000 });
    const over413 = parseRawResponse(raw.data);
    assert.equal(over413?.status, 413, `1.25 MiB chunked body: ${raw.data.toString().slice(0, 200)}`);
    assertProtoStatus(over413, '1.25 MiB chunked body');

    // two requests pipelined on one connection, then a GET: three answers, in order
    const ps = [[otlp.makeSpan()], [otlp.makeSpan()]];
    const frame = (b) => Buffer.concat([Buffer.from('POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\n' +
      `Content-Type: application/x-protobuf\r\nContent-Length: ${b.length}\r\n\r\n`), b]);
    raw = await rawExchange(port, Buffer.concat([frame(otlp.encodeRequest(ps[0])), frame(otlp.encodeRequest(ps[1])),
      Buffer.from('GET /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n')]), { timeoutMs: 3000 });
    assert.deepEqual(raw.data.toString('latin1').match(/^HTTP\/1\.1 \d{3}/gm),
      ['HTTP/1.1 200', 'HTTP/1.1 200', 'HTTP/1.1 405'], 'pipelined answers');
    good.sent.push(...ps.flat().map((s) => s.spanId));
  });

  it('the good client only ever saw 200, all its spans reached the sink, hotspan still answers', async () => {
    goodRunning = false;
    await goodLoop;
    assert.equal(good.errors.length, 0, `${good.errors.length} good requests failed, e.g.:\n` +
      good.errors.slice(0, 5).join('\n'));
    assert.ok(good.statuses.length >= 20, `the good client sent only ${good.statuses.length} requests`);
    const want = new Set(good.sent);
    const arrived = () => sink.spans().filter((s) => want.has(s.span.spanId));
    await sink.waitFor(() => arrived().length >= want.size, 10000,
      () => `${arrived().length}/${want.size} good spans at the sink`);
    const ids = arrived().map((s) => s.span.spanId);
    assert.equal(new Set(ids).size, ids.length, 'a good span arrived twice');
    assert.equal(ids.length, want.size);
    // Nothing from the bad requests leaked through.
    assert.equal(sink.spans().length, want.size, 'spans at the sink besides the good ones');

    const health = await request({ port: hs.ports.admin, method: 'GET', path: '/healthz' });
    assert.equal(health.status, 200, '/healthz');
    const last = otlp.makeSpan({ name: 'after-the-storm' });
    const res = await postProto(port, otlp.encodeRequest([last]));
    assert.equal(res.status, 200, 'a good request after everything');
    await sink.waitFor(() => sink.spans().some((s) => s.span.spanId === last.spanId), 5000,
      () => 'the last good span did not arrive');
  });
});
