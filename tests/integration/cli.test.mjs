// The command line and the config as a user meets them: --version, --help, `validate` (exit 2
// and FILE:LINE:COL: key.path: message for each mistake), ${env:...} expansion, defaults
// (`batch: {}`, a pipeline without processors), the `otlphttp` exporter, drain on SIGTERM,
// /healthz; and the documentation that quotes it: docs/reference.md's config reference and the
// README's first config.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { startHotspan, runHotspan, writeConfig } from './lib/hotspan.mjs';
import { startSink } from './lib/sink.mjs';
import { request, postProto } from './lib/http.mjs';
import * as otlp from './lib/otlp.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const sinks = [];
async function newSink() {
  const s = await startSink();
  sinks.push(s);
  return s;
}
after(async () => { for (const s of sinks) await s.stop(); });

// Sends `n` spans to a running hotspan, expects 200, and waits for them at the sink.
async function sendAndExpect(hs, sink, n = 3, { timeoutMs = 5000, path = '/v1/traces' } = {}) {
  const spans = Array.from({ length: n }, () => otlp.makeSpan());
  const res = await postProto(hs.ports.otlp, otlp.encodeRequest(spans));
  assert.equal(res.status, 200, `POST /v1/traces answered ${res.status}: ${res.body}`);
  const ids = new Set(spans.map((s) => s.spanId));
  const got = () => sink.spans(path).filter((s) => ids.has(s.span.spanId));
  await sink.waitFor(() => got().length >= n, timeoutMs,
    () => `${got().length}/${n} spans at the sink`);
  return got();
}

async function stopOk(hs) {
  const r = await hs.stop();
  assert.equal(r.code, 0, `exit code on SIGTERM\n${r.logs.slice(-30).join('\n')}`);
  return r;
}

const GOOD = (sinkPort) => `receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:0
processors:
  batch: {timeout: 50ms, send_batch_size: 8192}
exporters:
  otlp:
    endpoint: http://127.0.0.1:${sinkPort}
    compression: gzip
    headers: {X-Scope-OrgID: tenant-a}
service:
  telemetry:
    admin: 127.0.0.1:0
    log_level: info
  pipelines:
    traces: {receivers: [otlp], processors: [batch], exporters: [otlp]}
`;

describe('command line', () => {
  it('--version prints a version and exits 0', async () => {
    const r = await runHotspan(['--version']);
    assert.equal(r.code, 0, `--version exit code; stderr: ${r.stderr}`);
    assert.match(r.stdout, /\d+\.\d+\.\d+/, `--version output: ${JSON.stringify(r.stdout)}`);
  });

  it('--help mentions validate and exits 0', async () => {
    const r = await runHotspan(['--help']);
    assert.equal(r.code, 0, `--help exit code; stderr: ${r.stderr}`);
    assert.match(r.stdout + r.stderr, /validate/, '--help does not mention validate');
  });

  it('validate accepts a good config (exit 0)', async () => {
    const { dir, file } = writeConfig(GOOD(9));
    try {
      const r = await runHotspan(['validate', '-c', file]);
      assert.equal(r.code, 0, `validate good.yaml: exit ${r.code}\n${r.stdout}${r.stderr}`);
    } finally { rmSync(dir, { recursive: true, force: true }); }
  });

  it('validate reports every mistake as FILE:LINE:COL: key.path: message and exits 2', async () => {
    const bad = [
      'receivers:', //                                  1
      '  otlp:', //                                     2
      '    protocols:', //                              3
      '      http:', //                                 4
      '        endpoint: 127.0.0.1:0', //               5
      '        bogus_key: 1', //                        6  unknown key
      'processors:', //                                 7
      '  batch:', //                                    8
      '    timeout: 30x', //                            9  bad duration
      'exporters:', //                                  10
      '  otlp:', //                                     11
      '    endpoint: http://127.0.0.1:9', //            12
      'service:', //                                    13
      '  telemetry:', //                                14
      '    admin: 127.0.0.1:0', //                      15
      '  pipelines:', //                                16
      '    traces:', //                                 17
      '      receivers: [otlp]', //                     18
      '      processors: [batch]', //                   19
      '      exporters: [otlp, otlp/missing]', //       20 exporter not defined
      '',
    ].join('\n');
    const { dir, file } = writeConfig(bad, 'bad.yaml');
    try {
      const r = await runHotspan(['validate', '-c', file]);
      const out = r.stdout + r.stderr;
      assert.equal(r.code, 2, `validate bad.yaml: exit ${r.code}\n${out}`);
      const esc = file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      const expect = [
        // [line, allowed columns (key or value), key path, message must match]
        [6, [9, 20], /receivers\.otlp\.protocols\.http\.bogus_key/, /./],
        [9, [5, 14], /processors\.batch\.timeout/, /./],
        [20, [7, 18, 19, 25], /service\.pipelines\.traces\.exporters(\[1\])?/, /otlp\/missing/],
      ];
      for (const [line, cols, keyRe, msgRe] of expect) {
        const re = new RegExp(`^${esc}:${line}:(\\d+): (${keyRe.source}): (.+)$`, 'm');
        const m = re.exec(out);
        assert.ok(m, `no "${file}:${line}:COL: ${keyRe.source}: message" line in:\n${out}`);
        assert.ok(cols.includes(Number(m[1])), `line ${line}: column ${m[1]}, expected one of ${cols}\n${m[0]}`);
        assert.match(m[0], msgRe, `line ${line}: message does not name the culprit:\n${m[0]}`);
      }
    } finally { rmSync(dir, { recursive: true, force: true }); }
  });
});

describe('running configs', () => {
  it('${env:VAR} and ${env:VAR:-default} are expanded', async () => {
    const sink = await newSink();
    const hs = await startHotspan(`receivers:
  otlp:
    protocols:
      http:
        endpoint: \${env:HS_IT_LISTEN:-127.0.0.1:0}
processors:
  batch: {timeout: 50ms}
exporters:
  otlp:
    endpoint: \${env:HS_IT_SINK}
    headers:
      X-Scope-OrgID: \${env:HS_IT_TENANT_UNSET:-tenant-default}
      X-From-Env: \${env:HS_IT_SET:-not-this}
service:
  telemetry:
    admin: 127.0.0.1:0
  pipelines:
    traces: {receivers: [otlp], processors: [batch], exporters: [otlp]}
`, { env: { HS_IT_SINK: sink.url, HS_IT_SET: 'from-env', HS_IT_TENANT_UNSET: undefined } });
    try {
      const got = await sendAndExpect(hs, sink);
      const req = sink.accepted().find((r) => r.seq === got[0].request);
      assert.equal(req.headers['x-scope-orgid'], 'tenant-default');
      assert.equal(req.headers['x-from-env'], 'from-env');
    } finally { await stopOk(hs); }
  });

  it('batch: {} (all defaults) runs', async () => {
    const sink = await newSink();
    const hs = await startHotspan(`receivers:
  otlp:
    protocols:
      http: {endpoint: 127.0.0.1:0}
processors:
  batch: {}
exporters:
  otlp: {endpoint: http://127.0.0.1:${sink.port}}
service:
  telemetry: {admin: 127.0.0.1:0}
  pipelines:
    traces: {receivers: [otlp], processors: [batch], exporters: [otlp]}
`);
    try {
      await sendAndExpect(hs, sink, 3, { timeoutMs: 10000 });
    } finally { await stopOk(hs); }
  });

  it('a pipeline without processors runs', async () => {
    const sink = await newSink();
    const hs = await startHotspan(`receivers:
  otlp:
    protocols:
      http: {endpoint: 127.0.0.1:0}
exporters:
  otlp: {endpoint: http://127.0.0.1:${sink.port}}
service:
  telemetry: {admin: 127.0.0.1:0}
  pipelines:
    traces: {receivers: [otlp], exporters: [otlp]}
`);
    try {
      await sendAndExpect(hs, sink);
    } finally { await stopOk(hs); }
  });

  it('the otlphttp exporter works like otlp', async () => {
    const sink = await newSink();
    const hs = await startHotspan(`receivers:
  otlp:
    protocols:
      http: {endpoint: 127.0.0.1:0}
processors:
  batch: {timeout: 50ms}
exporters:
  otlphttp: {endpoint: http://127.0.0.1:${sink.port}}
service:
  telemetry: {admin: 127.0.0.1:0}
  pipelines:
    traces: {receivers: [otlp], processors: [batch], exporters: [otlphttp]}
`);
    try {
      const got = await sendAndExpect(hs, sink);
      const req = sink.accepted().find((r) => r.seq === got[0].request);
      assert.equal(req.path, '/v1/traces');
      assert.equal(req.headers['content-type'], 'application/x-protobuf');
    } finally { await stopOk(hs); }
  });

  it('two receivers (otlp, otlp/2) feed one pipeline, each on its own port', async () => {
    const sink = await newSink();
    const hs = await startHotspan(`receivers:
  otlp:
    protocols:
      http: {endpoint: 127.0.0.1:0}
  otlp/2:
    protocols:
      http: {endpoint: 127.0.0.1:0}
processors:
  batch: {timeout: 50ms}
exporters:
  otlp: {endpoint: http://127.0.0.1:${sink.port}}
service:
  telemetry: {admin: 127.0.0.1:0}
  pipelines:
    traces: {receivers: [otlp, otlp/2], processors: [batch], exporters: [otlp]}
`, { waitFor: ['otlp', 'otlp/2', 'admin'] });
    try {
      assert.notEqual(hs.ports.otlp, hs.ports['otlp/2']);
      await sendAndExpect(hs, sink);
      await sendAndExpect({ ports: { otlp: hs.ports['otlp/2'] } }, sink);
    } finally { await stopOk(hs); }
  });

  it('SIGTERM flushes spans still in the batch processor, then exits 0', async () => {
    const sink = await newSink();
    const hs = await startHotspan(`receivers:
  otlp:
    protocols:
      http: {endpoint: 127.0.0.1:0}
processors:
  batch: {timeout: 10s, send_batch_size: 8192}
exporters:
  otlp: {endpoint: http://127.0.0.1:${sink.port}}
service:
  telemetry: {admin: 127.0.0.1:0}
  pipelines:
    traces: {receivers: [otlp], processors: [batch], exporters: [otlp]}
`);
    let r;
    const spans = Array.from({ length: 10 }, () => otlp.makeSpan());
    try {
      const res = await postProto(hs.ports.otlp, otlp.encodeRequest(spans));
      assert.equal(res.status, 200);
      await sleep(300);
      assert.equal(sink.spans().length, 0, 'batch timeout is 10s: nothing should have left yet');
    } finally {
      r = await hs.stop();
    }
    assert.equal(r.code, 0, `exit code on SIGTERM\n${r.logs.slice(-30).join('\n')}`);
    const ids = new Set(spans.map((s) => s.spanId));
    const got = sink.spans().filter((s) => ids.has(s.span.spanId));
    assert.equal(got.length, 10, 'spans flushed to the sink before exit');
  });

  it('service.shutdown_timeout bounds a drain the backend never lets finish: exit 1, said in the log', async () => {
    const sink = await newSink();
    await sink.down();
    const hs = await startHotspan(`receivers:
  otlp:
    protocols:
      http: {endpoint: 127.0.0.1:0}
exporters:
  otlp:
    endpoint: http://127.0.0.1:${sink.port}
    retry_on_failure: {initial_interval: 50ms, max_interval: 100ms, max_elapsed_time: 0}
service:
  shutdown_timeout: 500ms
  telemetry: {admin: 127.0.0.1:0}
  pipelines:
    traces: {receivers: [otlp], exporters: [otlp]}
`);
    const res = await postProto(hs.ports.otlp, otlp.encodeRequest([otlp.makeSpan()]));
    assert.equal(res.status, 200);
    const t0 = Date.now();
    const r = await hs.stop();
    assert.equal(r.code, 1, `exit code when the drain times out\n${r.logs.slice(-20).join('\n')}`);
    assert.ok(Date.now() - t0 < 5000, 'exited soon after the 500ms shutdown_timeout');
    assert.ok(r.logs.some((l) => /shutdown_timeout \(500 ms\) passed/.test(l)),
      `the log says why\n${r.logs.slice(-20).join('\n')}`);
  });

  it('/healthz answers 200', async () => {
    const sink = await newSink();
    const hs = await startHotspan(GOOD(sink.port));
    try {
      const res = await request({ port: hs.ports.admin, method: 'GET', path: '/healthz' });
      assert.equal(res.status, 200);
      const m = await request({ port: hs.ports.admin, method: 'GET', path: '/metrics' });
      assert.equal(m.status, 200);
      assert.match(String(m.headers['content-type']), /^text\/plain/);
    } finally { await stopOk(hs); }
  });
});

describe('documentation', () => {
  it("docs/reference.md's config reference is what `hotspan config-reference` prints", async () => {
    const r = await runHotspan(['config-reference']);
    assert.equal(r.code, 0);
    const doc = readFileSync(new URL('../../docs/reference.md', import.meta.url), 'utf8');
    const m = /<!-- config-reference:begin -->\n([\s\S]*?)\n<!-- config-reference:end -->/.exec(doc);
    assert.ok(m, 'docs/reference.md has the config reference markers');
    assert.equal(m[1], r.stdout.replace(/^\n+|\n+$/g, ''),
      'docs/reference.md is out of date: run scripts/gen-reference');
  });

  it("the README's first config passes `hotspan validate`", async () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    const section = /^## A first config\n([\s\S]*?)^## /m.exec(readme);
    assert.ok(section, 'README has a "## A first config" section');
    const yaml = /^```yaml\n([\s\S]*?)^```/m.exec(section[1]);
    assert.ok(yaml, 'the section has a ```yaml block');
    const { dir, file } = writeConfig(yaml[1]);
    try {
      const r = await runHotspan(['validate', '-c', file]);
      assert.equal(r.code, 0, `validate README's first config: exit ${r.code}\n${r.stdout}${r.stderr}`);
    } finally { rmSync(dir, { recursive: true, force: true }); }
  });
});
