// Broken and hostile profiles at the pyroscope receiver while a good client keeps sending: each
// bad request (malformed pprof, folded lines without a count or with a negative one, until before
// from, names past max_string_length, limits) gets 400 / 413 / 415 with a JSON {code, message}
// body whose message names the problem; the good client (valid profiles over /ingest and push, the whole time) sees only 200
// and every one of its profiles reaches the sink exactly once; /metrics counts the failures.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { gzipSync } from 'node:zlib';
import { startHotspan } from './lib/hotspan.mjs';
import { rawExchange, parseRawResponse } from './lib/http.mjs';
import { fetchMetrics, metricSum } from './lib/metrics.mjs';
import {
  startPyroscopeSink, postIngest, postPush, multipartBody, encodePushRequest,
} from './lib/pyroscope_sink.mjs';
import {
  buildProfile, encodeProfile, Profile, Function as PFunction, Location, Line, Sample, ValueType,
  StringTable, emptyTableToken,
} from './lib/pprof.mjs';

const LIMITS = { body: 256 * 1024, decompressed: 1024 * 1024, samples: 200, labels: 8 };

const goodSpec = (n) => ({
  samples: [
    { stack: ['main', 'serve', `handler_${n % 7}`], values: [3, 30000000] },
    { stack: ['main', 'gc'], values: [1, 10000000] },
  ],
});

/** A hand-made Profile whose string table / ids are exactly as given (for invalid ones). */
function rawProfile({ strings = ['', 'samples', 'count', 'cpu', 'nanoseconds', 'main', 'main.go'],
  functions = [{ id: 1, name: 5, filename: 6 }], locations = [{ id: 1, fn: 1 }],
  samples = [{ loc: [1], values: [1, 10000000] }] } = {}) {
  const st = new StringTable(emptyTableToken);
  for (const s of strings) st.dedup(s);
  return new Profile({
    sampleType: [new ValueType({ type: 1, unit: 2 }), new ValueType({ type: 3, unit: 4 })],
    periodType: new ValueType({ type: 3, unit: 4 }),
    period: 10000000,
    timeNanos: BigInt(Date.now()) * 1000000n,
    durationNanos: 1000000000n,
    stringTable: st,
    function: functions.map((f) => new PFunction({ id: f.id, name: f.name, systemName: f.name, filename: f.filename })),
    location: locations.map((l) => new Location({ id: l.id, line: [new Line({ functionId: l.fn, line: 1 })] })),
    sample: samples.map((s) => new Sample({ locationId: s.loc, value: s.values })),
  });
}
const rawBytes = (opts) => gzipSync(Buffer.from(rawProfile(opts).encode()));

const ingestPprof = (body, name = 'it-bad{case=x}') => ({
  query: { name, format: 'pprof', from: String(Math.floor(Date.now() / 1000)), spyName: 'gospy' }, body,
});

describe('bad input at the pyroscope receiver', () => {
  let sink;
  let hs;
  let port;
  let goodRunning = false;
  let goodLoop;
  const good = { sent: [], statuses: [], errors: [] };
  let badSent = 0;

  before(async () => {
    sink = await startPyroscopeSink();
    hs = await startHotspan(`receivers:
  pyroscope:
    endpoint: 127.0.0.1:0
    max_request_body_size: ${LIMITS.body}
    max_decompressed_size: ${LIMITS.decompressed}
    max_samples: ${LIMITS.samples}
    max_labels: ${LIMITS.labels}
exporters:
  pyroscope:
    endpoint: http://127.0.0.1:${sink.port}
service:
  telemetry:
    admin: 127.0.0.1:0
    log_level: info
  pipelines:
    profiles: {receivers: [pyroscope], exporters: [pyroscope]}
`, { waitFor: ['pyroscope', 'admin'] });
    port = hs.ports.pyroscope;

    // the good client: one valid profile at a time, alternating /ingest and push
    goodRunning = true;
    goodLoop = (async () => {
      let n = 0;
      while (goodRunning && n < 2000) {
        n += 1;
        const seq = String(n);
        const bytes = encodeProfile(goodSpec(n));
        try {
          const res = n % 2
            ? await postIngest(port, { query: { name: `it-good{seq=${seq}}`, format: 'pprof', spyName: 'gospy' }, body: bytes })
            : await postPush(port, encodePushRequest([{ labels: { __name__: 'process_cpu', service_name: 'it-good', seq },
              samples: [{ raw: bytes }] }]));
          good.statuses.push(res.status);
          if (res.status === 200) good.sent.push(seq);
          else good.errors.push(`${seq}: ${res.status} ${res.body}`);
        } catch (e) {
          good.errors.push(`${seq}: ${e.message}`);
        }
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    await new Promise((r) => setTimeout(r, 100));
  });

  after(async () => {
    goodRunning = false;
    if (goodLoop) await goodLoop;
    if (hs) {
      const r = await hs.stop();
      assert.equal(r.code, 0, `hotspan exit code on SIGTERM\n${r.logs.join('\n')}`);
    }
    if (sink) await sink.stop();
  });

  function assertJsonError(res, status, re, what) {
    assert.equal(res.status, status, `${what}: status (body: ${res.body})`);
    assert.match(String(res.headers['content-type']), /^application\/json/, `${what}: content-type`);
    assert.ok(res.json, `${what}: JSON body, got ${res.body}`);
    assert.equal(typeof res.json.code, 'string', `${what}: a Connect error code`);
    assert.match(res.json.message, re, `${what}: message names the problem`);
    badSent += 1;
  }

  it('not pprof, truncated gzip, a gzip bomb: 400 / 413', async () => {
    let res = await postIngest(port, ingestPprof(Buffer.from('this is certainly not a pprof profile\n')));
    assertJsonError(res, 400, /not a pprof profile/, 'not pprof (/ingest)');
    res = await postPush(port, encodePushRequest([{ labels: { __name__: 'process_cpu', service_name: 'it-bad' },
      samples: [{ raw: Buffer.from([0xff, 0xff, 0xff, 0x01, 0x02]) }] }]));
    assertJsonError(res, 400, /samples\[0\].*not a pprof profile/, 'not pprof (push)');

    const gz = encodeProfile(goodSpec(1));
    res = await postIngest(port, ingestPprof(gz.subarray(0, gz.length - 12)));
    assertJsonError(res, 400, /gzip.*(truncat|ends early|unexpected end)/i, 'truncated gzip');

    const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024), { level: 9 });
    assert.ok(bomb.length < LIMITS.body, `the bomb is small on the wire (${bomb.length} bytes)`);
    res = await postIngest(port, ingestPprof(bomb));
    assertJsonError(res, 413, /max_decompressed_size/, 'gzip bomb (/ingest)');
    res = await postPush(port, encodePushRequest([{ labels: { __name__: 'process_cpu', service_name: 'it-bad' },
      samples: [{ raw: bomb }] }]));
    assertJsonError(res, 413, /max_decompressed_size/, 'gzip bomb (push)');
    // and the whole push request gzipped: inflated within max_request_body_size
    res = await postPush(port, bomb, { headers: { 'content-encoding': 'gzip' } });
    assertJsonError(res, 413, /max_request_body_size/, 'gzip bomb (push Content-Encoding)');
  });

  it('invalid pprof: string index out of range, bad string_table[0], missing / duplicate ids: 400', async () => {
    const cases = [
      [{ functions: [{ id: 1, name: 999, filename: 6 }] }, /string index 999 out of range/, 'function name index out of range'],
      [{ strings: ['x', 'samples', 'count', 'cpu', 'nanoseconds', 'main', 'main.go'] }, /string_table\[0\]/,
        'string_table[0] not empty'],
      [{ samples: [{ loc: [42], values: [1, 10000000] }] }, /location 42/, 'sample names a missing location'],
      [{ locations: [{ id: 1, fn: 7 }] }, /function 7/, 'location names a missing function'],
      [{ functions: [{ id: 1, name: 5, filename: 6 }, { id: 1, name: 5, filename: 6 }] }, /function id 1 .*(twice|duplicate|unique)/i,
        'duplicate function id'],
      [{ locations: [{ id: 1, fn: 1 }, { id: 1, fn: 1 }] }, /location id 1 .*(twice|duplicate|unique)/i, 'duplicate location id'],
      [{ functions: [{ id: 0, name: 5, filename: 6 }], locations: [{ id: 1, fn: 0 }] }, /function.*id 0/, 'function id 0'],
      [{ samples: [{ loc: [1], values: [1] }] }, /values?.*2 sample types/, 'value count != sample types'],
    ];
    for (const [opts, re, what] of cases) {
      const body = rawBytes(opts);
      let res = await postIngest(port, ingestPprof(body));
      assertJsonError(res, 400, re, `${what} (/ingest)`);
      res = await postPush(port, encodePushRequest([{ labels: { __name__: 'process_cpu', service_name: 'it-bad' },
        samples: [{ raw: body }] }]));
      assertJsonError(res, 400, re, `${what} (push)`);
    }
  });

  it('/ingest name: missing, bad label syntax; multipart without a profile: 400', async () => {
    const body = encodeProfile(goodSpec(2));
    let res = await postIngest(port, { query: { format: 'pprof' }, body });
    assertJsonError(res, 400, /parameter name|\bname\b.*(missing|required)/, 'missing name');
    for (const name of ['it-bad{env=prod,=x}', 'it-bad{bad-key=1}', 'it-bad{env=prod', '{env=prod}', 'it-bad{__name__=x}']) {
      res = await postIngest(port, ingestPprof(body, name));
      assertJsonError(res, 400, /^name: /, `bad name ${name}`);
    }
    const mp = multipartBody([{ name: 'not_profile', filename: 'x.pprof', data: body }]);
    res = await postIngest(port, { query: { name: 'it-bad' }, body: mp.body, contentType: mp.contentType });
    assertJsonError(res, 400, /"profile" part/, 'multipart without a profile part');
    // bad push labels
    res = await postPush(port, encodePushRequest([{ labels: [['service_name', 'it-bad'], ['__name__', 'process_cpu'],
      ['9bad', 'x']], samples: [{ raw: body }] }]));
    assertJsonError(res, 400, /label name.*9bad/, 'push label name not [a-zA-Z_][a-zA-Z0-9_.]*');
  });

  it('over the limits: samples, labels, body size: 413', async () => {
    const many = buildProfile({ samples: Array.from({ length: LIMITS.samples + 1 },
      (_, i) => ({ stack: ['main', `f${i}`], values: [1, 10000000] })) });
    let res = await postIngest(port, ingestPprof(encodeProfile(many)));
    assertJsonError(res, 413, /max_samples/, 'too many samples');

    const labels = Array.from({ length: LIMITS.labels + 1 }, (_, i) => `k${i}=v${i}`).join(',');
    res = await postIngest(port, ingestPprof(encodeProfile(goodSpec(3)), `it-bad{${labels}}`));
    assertJsonError(res, 413, /more than 8/, 'too many name labels');
    const pushLabels = { __name__: 'process_cpu', service_name: 'it-bad' };
    for (let i = 0; i < LIMITS.labels; i += 1) pushLabels[`k${i}`] = `v${i}`;
    res = await postPush(port, encodePushRequest([{ labels: pushLabels, samples: [{ raw: encodeProfile(goodSpec(3)) }] }]));
    assertJsonError(res, 413, /more than 8/, 'too many push labels');

    // a body over max_request_body_size is refused from its Content-Length, before it is read
    const head = `POST /ingest?name=it-bad&format=pprof HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n` +
      `Content-Length: ${LIMITS.body + 1}\r\n\r\n`;
    const ex = await rawExchange(port, Buffer.concat([Buffer.from(head), Buffer.alloc(1024)]), { timeoutMs: 5000 });
    const parsed = parseRawResponse(ex.data);
    assert.ok(parsed, `an HTTP answer to an oversized body, got ${ex.data.toString('latin1').slice(0, 200)}`);
    const text = parsed.body.toString('utf8');
    let json = null;
    try { json = JSON.parse(text); } catch { /* asserted below */ }
    assertJsonError({ status: parsed.status, headers: parsed.headers, body: text, json }, 413,
      /max_request_body_size \(262144 bytes\)/, 'a body over max_request_body_size');
    assert.equal(parsed.headers.connection, 'close', 'the refused body is not read');
  });

  it('folded: a negative count, a line without one; until before from; a 100 KB name: 400', async () => {
    const folded = (body, query = {}) => postIngest(port, { query: { name: 'it-bad.cpu', ...query },
      body: Buffer.from(body), contentType: 'text/plain' });
    let res = await folded('main;work 3\nmain;gc -2\n');
    assertJsonError(res, 400, /^folded: line 2: count -2 is negative/, 'a negative count');
    res = await folded('main;work 3\n\nmain;gc\n');
    assertJsonError(res, 400, /^folded: line 3: no count \(a folded line is "frame;frame count"\)$/,
      'a line without a count (Pyroscope skips it)');
    const now = Math.floor(Date.now() / 1000);
    res = await folded('main;work 3\n', { from: String(now), until: String(now - 10) });
    assertJsonError(res, 400, new RegExp(`^until \\(${now - 10}\\) is before from \\(${now}\\)$`), 'until < from');
    // names past max_string_length (65535, where Pyroscope cuts symbols), in folded text and pprof
    const long = `main.${'x'.repeat(100 * 1024)}`;
    res = await folded(`main;${long} 1\n`);
    assertJsonError(res, 400, /^folded: line 1: frame 2 is 102405 bytes long, more than max_string_length \(65535\)$/,
      'a folded frame of 100 KB');
    const pprof = encodeProfile(buildProfile({ samples: [{ stack: ['main', long], values: [1, 10000000] }],
      files: { [long]: 'main.go' } }));
    res = await postIngest(port, ingestPprof(pprof));
    assertJsonError(res, 400, /^profile: string_table\[\d+\]: 102405 bytes \("main\.x{27}\.\.\."\), more than max_string_length \(65535\)$/,
      'a function name of 100 KB (/ingest)');
    res = await postPush(port, encodePushRequest([{ labels: { __name__: 'process_cpu', service_name: 'it-bad' },
      samples: [{ raw: pprof }] }]));
    assertJsonError(res, 400, /^series\[0\]\.samples\[0\]: string_table\[\d+\]: 102405 bytes/,
      'a function name of 100 KB (push)');
  });

  it('a sample_type_config over 64 KiB: 413 before jansson reads it', async () => {
    const stc = JSON.stringify(Object.fromEntries(Array.from({ length: 7000 },
      (_, i) => [`t${i}`, { units: 'samples' }])));
    assert.ok(stc.length > 65536 && stc.length < LIMITS.body, `${stc.length} bytes`);
    const mp = multipartBody([{ name: 'profile', filename: 'p.pprof', data: encodeProfile(goodSpec(5)) },
      { name: 'sample_type_config', filename: 'sample_type_config.json', data: Buffer.from(stc) }]);
    const res = await postIngest(port, { query: { name: 'it-bad' }, body: mp.body, contentType: mp.contentType });
    assertJsonError(res, 413, new RegExp(`^sample_type_config: ${stc.length} bytes, more than 65536`),
      'a sample_type_config of 200 KB');
  });

  it('wrong content type / encoding on push: 415', async () => {
    const body = encodePushRequest([{ labels: { __name__: 'process_cpu', service_name: 'it-bad' },
      samples: [{ raw: encodeProfile(goodSpec(4)) }] }]);
    let res = await postPush(port, body, { contentType: 'text/plain' });
    assertJsonError(res, 415, /Content-Type "text\/plain"/, 'push as text/plain');
    res = await postPush(port, body, { contentType: 'application/grpc-web+foo' });
    assertJsonError(res, 415, /Content-Type/i, 'push as application/grpc-web+foo');
    res = await postPush(port, body, { headers: { 'content-encoding': 'br' } });
    assertJsonError(res, 415, /Content-Encoding "br"/, 'push with Content-Encoding br');
  });

  it('the good client lost nothing, and /metrics counts the failures', async () => {
    await new Promise((r) => setTimeout(r, 200));
    goodRunning = false;
    await goodLoop;
    assert.deepEqual(good.errors, [], 'the good client saw only 200');
    assert.ok(good.sent.length >= 20, `the good client kept sending during the test (${good.sent.length})`);
    const seqs = () => sink.profiles().filter((p) => p.labels.service_name === 'it-good').map((p) => p.labels.seq);
    await sink.waitFor(() => new Set(seqs()).size >= good.sent.length, 15000,
      () => `good profiles at the sink: ${new Set(seqs()).size}/${good.sent.length}`);
    const got = seqs();
    assert.equal(got.length, good.sent.length, 'every good profile arrived exactly once');
    assert.deepEqual(new Set(got), new Set(good.sent));
    assert.ok(!sink.profiles().some((p) => p.labels.service_name === 'it-bad'), 'no bad profile was forwarded');

    const m = await fetchMetrics(hs.ports.admin);
    const failed = metricSum(m, 'hotspan_receiver_failed_requests_total');
    assert.equal(failed, badSent, `hotspan_receiver_failed_requests_total counts every JSON-answered failure\n` +
      Object.entries(m).filter(([k]) => k.includes('failed_requests')).map(([k, v]) => `${k} ${v}`).join('\n'));
    const accepted = metricSum(m, 'hotspan_receiver_accepted_profiles_total');
    assert.equal(accepted, good.sent.length, 'accepted profiles = the good ones');
  });
});
