// `hotspan demo`, the README's first command, end to end: the real binary generates api-server ->
// user-db traffic with N+1 requests, CPU profiles of both services and api-server's goroutine
// profile into its own receivers, and stdout shows each slow findByEmail span enriched by the
// correlator (duration, where the CPU went, the exact N+1 query count the generator logged for
// that trace) and its api-server caller's wait explained off CPU by the goroutine profile (parked
// in UserClient.fetch, in net/http); fast spans never appear; /metrics counts the accepted and
// annotated spans during the run; --duration ends it with exit 0; --seed repeats the N+1
// requests; a config without the receivers the demo needs is refused with exit 2.
import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { HOTSPAN_BIN, writeConfig, runHotspan, parseLogLine, sanitizerReport } from './lib/hotspan.mjs';
import { demoConfig } from './lib/demo.mjs';
import { fetchMetrics, metricSum } from './lib/metrics.mjs';

const DURATION_S = 14;
const SEED = 20261123;

/** Runs `hotspan demo -c FILE ARGS`; calls onLine(line) for each stderr line while it runs. */
function runDemo(file, args, { onLine = () => {}, timeoutMs = 60000 } = {}) {
  return new Promise((resolve, reject) => {
    const proc = spawn(HOTSPAN_BIN, ['demo', '-c', file, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let partial = '';
    proc.stdout.setEncoding('utf8').on('data', (d) => { stdout += d; });
    proc.stderr.setEncoding('utf8').on('data', (d) => {
      stderr += d;
      partial += d;
      let nl;
      while ((nl = partial.indexOf('\n')) >= 0) { onLine(partial.slice(0, nl)); partial = partial.slice(nl + 1); }
    });
    const timer = setTimeout(() => { proc.kill('SIGKILL'); reject(new Error(`demo did not exit\n${stderr}`)); }, timeoutMs);
    proc.on('error', (e) => { clearTimeout(timer); reject(e); });
    proc.on('close', (code, signal) => {
      clearTimeout(timer);
      const san = sanitizerReport(stderr);
      if (san) { reject(new Error(`sanitizer report from hotspan demo:\n${san}`)); return; }
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** The generator's own record of each N+1 request: {trace: queries}. */
function nplus1Requests(stderr) {
  const out = new Map();
  for (const line of stderr.split('\n')) {
    const f = parseLogLine(line);
    const m = /^N\+1 request trace=([0-9a-f]{32}) findByEmail=(\d+)ms queries=(\d+)$/.exec(f.msg || '');
    if (f.component === 'demo' && m) out.set(m[1], { ms: Number(m[2]), queries: Number(m[3]) });
  }
  return out;
}

// user-db  UserRepository.findByEmail  612 ms — 65% findByEmail > loadPreferences — N+1: 52 queries  trace=<hex>
const SLOW_LINE = /^(\S+) {2}(.+?) {2}(\d+) ms — (.*?)(?: — N\+1: (\d+) queries)? {2}trace=([0-9a-f]{32})$/;

describe('hotspan demo', () => {
  let run;
  let cfg;
  let metricsDuringRun = null;
  let rerun;

  before(async () => {
    cfg = await demoConfig();
    const again = await demoConfig();
    let polling = null;
    const poll = async () => {
      // until the correlator has annotated something, while the demo runs
      for (let i = 0; i < 4 * DURATION_S; i++) {
        try {
          const m = await fetchMetrics(cfg.ports.admin);
          metricsDuringRun = m;
          if (metricSum(m, 'hotspan_correlator_annotated_spans_total') > 0) return;
        } catch { /* not listening yet, or already gone */ }
        await new Promise((r) => setTimeout(r, 500));
      }
    };
    [run, rerun] = await Promise.all([
      runDemo(cfg.file, ['--duration', String(DURATION_S), '--seed', String(SEED)], {
        onLine: (line) => {
          if (!polling && /component=admin .*listening on/.test(line)) polling = poll();
        },
      }),
      runDemo(again.file, ['--duration', '5', '--seed', String(SEED)]),
    ]);
    if (polling) await polling;
  });

  it('exits 0 after --duration, having drained', () => {
    assert.equal(run.code, 0, `exit code\n${run.stderr.split('\n').slice(-30).join('\n')}`);
    assert.match(run.stderr, /--duration passed/);
  });

  it('prints a banner with the ports, the /ui URL and how to stop', () => {
    const head = run.stdout.split('\n\n')[0];
    assert.match(head, new RegExp(`http://127\\.0\\.0\\.1:${cfg.ports.otlp}/v1/traces`));
    assert.match(head, new RegExp(`http://127\\.0\\.0\\.1:${cfg.ports.pyro}/ingest`));
    assert.match(head, new RegExp(`http://127\\.0\\.0\\.1:${cfg.ports.admin}/ui`));
    assert.match(head, /Ctrl-C to stop/);
  });

  it('shows every N+1 request as an enriched findByEmail line with its exact query count', () => {
    const gen = nplus1Requests(run.stderr);
    assert.ok(gen.size >= 2, `N+1 requests generated: ${gen.size}\n${run.stderr}`);
    const lines = run.stdout.split('\n').map((l) => SLOW_LINE.exec(l)).filter(Boolean);
    const db = lines.filter((m) => m[1] === 'user-db');
    for (const [trace, req] of gen) {
      const m = db.find((x) => x[6] === trace);
      assert.ok(m, `no line for N+1 trace ${trace}\nstdout:\n${run.stdout}`);
      assert.equal(m[2], 'UserRepository.findByEmail');
      assert.ok(Number(m[3]) >= 500, `duration ${m[3]} ms`);
      assert.ok(Math.abs(Number(m[3]) - req.ms) <= 1, `${m[3]} ms printed, ${req.ms} ms generated`);
      assert.match(m[4], /^\d+% findByEmail > loadPreferences/, `verdict: ${m[0]}`);
      assert.equal(Number(m[5]), req.queries, `N+1 count of ${trace}: ${m[0]}`);
    }
  });

  // api-server  GET /users/:id  677 ms — 7% on CPU; 100% getUser; off CPU (goroutines): 94% fetch (in net/http)  trace=<hex>
  it('explains each N+1 request\'s api-server wait from its goroutine profile: parked in UserClient.fetch, in net/http', () => {
    const gen = nplus1Requests(run.stderr);
    assert.ok(gen.size >= 2, `N+1 requests generated: ${gen.size}`);
    const api = run.stdout.split('\n').map((l) => SLOW_LINE.exec(l)).filter((m) => m && m[1] === 'api-server');
    for (const trace of gen.keys()) {
      const m = api.find((x) => x[6] === trace);
      assert.ok(m, `no api-server line for N+1 trace ${trace}\nstdout:\n${run.stdout}`);
      assert.equal(m[2], 'GET /users/:id');
      // it waited: little CPU, then the goroutine profile's verdict on where
      const v = /^(\d+)% on CPU; .*; off CPU \(goroutines\): (\d+)% (?:\S+ > )*fetch \(in net\/http\)$/.exec(m[4]);
      assert.ok(v, `no off-CPU explanation naming fetch in net/http: ${m[0]}`);
      assert.ok(Number(v[1]) < 20, `on CPU ${v[1]}%: ${m[0]}`);
      assert.ok(Number(v[2]) >= 80, `parked in fetch ${v[2]}% of the span: ${m[0]}`);
    }
  });

  it('reports no fast span as slow', () => {
    const out = run.stdout.split('\n\n').slice(1).join('\n\n').split('\n').filter((l) => l);
    assert.ok(out.length >= 2, `slow lines: ${out.length}`);
    for (const l of out) {
      const m = SLOW_LINE.exec(l);
      assert.ok(m, `not a slow-span line: ${JSON.stringify(l)}`);
      assert.ok(Number(m[3]) >= 500, `a ${m[3]} ms span was reported slow: ${l}`);
    }
  });

  it('/metrics during the run shows accepted and annotated spans', () => {
    assert.ok(metricsDuringRun, 'the admin port answered');
    const accepted = metricSum(metricsDuringRun, 'hotspan_receiver_accepted_spans_total');
    const annotated = metricSum(metricsDuringRun, 'hotspan_correlator_annotated_spans_total');
    assert.ok(accepted > 0, `hotspan_receiver_accepted_spans_total = ${accepted}`);
    assert.ok(annotated > 0, `hotspan_correlator_annotated_spans_total = ${annotated}`);
  });

  it('the same --seed generates the same N+1 requests', () => {
    assert.equal(rerun.code, 0, rerun.stderr);
    const a = [...nplus1Requests(run.stderr)];
    const b = [...nplus1Requests(rerun.stderr)];
    assert.ok(b.length >= 1, rerun.stderr);
    assert.deepEqual(b[0], a[0]);
  });
});

describe('hotspan demo until Ctrl-C', () => {
  it('runs without --duration until SIGINT, then drains and exits 0', async () => {
    const { file } = await demoConfig();
    let proc;
    const done = new Promise((resolve, reject) => {
      proc = spawn(HOTSPAN_BIN, ['demo', '-c', file], { stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      proc.stdout.resume();
      proc.stderr.setEncoding('utf8').on('data', (d) => {
        stderr += d;
        // once it is generating, Ctrl-C
        if (/component=demo msg="N\+1 request/.test(stderr) && !proc.signalled) {
          proc.signalled = true;
          proc.kill('SIGINT');
        }
      });
      const timer = setTimeout(() => { proc.kill('SIGKILL'); reject(new Error(`no exit\n${stderr}`)); }, 30000);
      proc.on('close', (code) => { clearTimeout(timer); resolve({ code, stderr }); });
    });
    const r = await done;
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /SIGINT received: draining/);
    assert.match(r.stderr, /component=demo msg="stopped: \d+ requests sent, 0 failed"/);
    assert.equal(sanitizerReport(r.stderr), null);
  });
});

describe('hotspan demo refuses what it cannot run', () => {
  it('a config without a pyroscope receiver: exit 2, naming what the demo needs', async () => {
    const { file } = writeConfig(`receivers:
  otlp: {protocols: {http: {endpoint: 127.0.0.1:0}}}
exporters:
  debug: {}
service:
  telemetry: {admin: 127.0.0.1:0}
  pipelines:
    traces: {receivers: [otlp], exporters: [debug]}
`);
    const r = await runHotspan(['demo', '-c', file, '--duration', '1']);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /hotspan\.yaml:2:3: receivers\.pyroscope: missing: hotspan demo sends traces/);
  });

  it('a bad --duration: exit 2 with the usage', async () => {
    const r = await runHotspan(['demo', '--duration', 'soon']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--duration wants a whole number of seconds/);
    assert.match(r.stderr, /hotspan demo \[-c FILE\]/);
  });
});
