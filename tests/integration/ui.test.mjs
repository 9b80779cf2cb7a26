// The correlator's /ui page on the admin port, in a real headless browser: Debian's chromium
// driven by playwright-core. A pprof of user-db (findByEmail > loadPreferences > query, and a
// function whose name carries markup) goes to the pyroscope receiver, then a slow
// UserRepository.findByEmail span with 12 N+1 children and a slow span whose name carries a
// <script> go to the otlp receiver. The page lists the slow span; its detail page draws an SVG
// flame graph naming findByEmail and loadPreferences; client-sent names render as text, never
// as markup; a screenshot is taken. No chromium is a failure, not a skip (scripts/setup
// installs it).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { spawn } from 'node:child_process';
import { startHotspan, HOTSPAN_BIN, sanitizerReport } from './lib/hotspan.mjs';
import { demoConfig } from './lib/demo.mjs';
import { startSink } from './lib/sink.mjs';
import { startPyroscopeSink, postIngest } from './lib/pyroscope_sink.mjs';
import { encodeProfile } from './lib/pprof.mjs';
import { encodeRequest, defaultResource, makeSpan, hexId } from './lib/otlp.mjs';
import { postProto, request } from './lib/http.mjs';
import { waitFor } from './lib/wait.mjs';
import { fetchMetrics } from './lib/metrics.mjs';

const CHROMIUM = process.env.HOTSPAN_CHROMIUM || '/usr/bin/chromium';
const XSS_SPAN = '<script>window.__xss=1</script>"quoted" \'single\'';
const XSS_FN = 'Evil.<img src=x onerror="window.__xss=2">';
const FIND = 'UserRepository.findByEmail';
const LOADP = 'UserRepository.loadPreferences';

const ns = (ms) => BigInt(Math.round(ms)) * 1000000n;

describe('/ui in headless chromium', () => {
  let hs;
  let sink;
  let psink;
  let browser;
  let dir;
  let slow;
  let xss;
  const consoleErrors = [];

  before(async () => {
    assert.ok(existsSync(CHROMIUM),
      `chromium not found at ${CHROMIUM}: run scripts/setup (it installs Debian's chromium) ` +
      'or set HOTSPAN_CHROMIUM to a Chromium binary');
    dir = mkdtempSync(join(tmpdir(), 'hotspan-ui-'));
    sink = await startSink();
    psink = await startPyroscopeSink();
    hs = await startHotspan(`receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:0
  pyroscope:
    endpoint: 127.0.0.1:0
processors:
  correlator:
    slow: {threshold: 300ms}
    slack: 1s
    max_wait: 10s
    pyroscope_url: http://pyroscope.example:4040
    ui: {recent: 10, grafana_url: 'http://grafana.example:3000'}
exporters:
  otlp:
    endpoint: http://127.0.0.1:${sink.port}
  pyroscope:
    endpoint: http://127.0.0.1:${psink.port}
service:
  telemetry:
    admin: 127.0.0.1:0
  pipelines:
    traces: {receivers: [otlp], processors: [correlator], exporters: [otlp]}
    profiles: {receivers: [pyroscope], processors: [correlator], exporters: [pyroscope]}
`, { waitFor: ['otlp', 'pyroscope', 'admin'] });

    // the profile first, covering the spans' window and the slack after it
    const now = Date.now();
    const from = ns(now - 10000);
    const until = ns(now + 5000);
    const q = ['pg.Client.query'];
    const pprof = encodeProfile({
      timeNanos: from,
      durationNanos: until - from,
      samples: [
        { stack: ['main', 'handle', FIND, LOADP, ...q], values: [31, 310000000] },
        { stack: ['main', 'handle', FIND, LOADP], values: [21, 210000000] },
        { stack: ['main', 'handle', FIND], values: [13, 130000000] },
        { stack: ['main', 'handle', 'healthz'], values: [28, 280000000] },
        { stack: ['main', XSS_FN], values: [7, 70000000] },
      ],
    });
    const r = await postIngest(hs.ports.pyroscope, {
      query: { name: 'user-db.cpu{service_name=user-db}', from: String(from), until: String(until),
        format: 'pprof', spyName: 'gospy', sampleRate: '100' },
      body: pprof,
    });
    assert.equal(r.status, 200, `ingest: ${r.status} ${r.body}`);

    const start = ns(now - 2000);
    slow = makeSpan({ name: FIND, startTimeUnixNano: String(start),
      endTimeUnixNano: String(start + ns(612)), attributes: [] });
    const kids = [];
    for (let i = 0; i < 12; i++) {
      kids.push(makeSpan({ name: 'SELECT preferences', traceId: slow.traceId, parentSpanId: slow.spanId,
        startTimeUnixNano: String(start + ns(10 + i)), endTimeUnixNano: String(start + ns(14 + i)),
        attributes: [{ key: 'db.statement', value: { stringValue: `SELECT * FROM preferences WHERE user_id = ${i}` } }] }));
    }
    xss = makeSpan({ name: XSS_SPAN, traceId: hexId(16), startTimeUnixNano: String(start),
      endTimeUnixNano: String(start + ns(450)), attributes: [] });
    const res = await postProto(hs.ports.otlp,
      encodeRequest([...kids, slow, xss], { resource: defaultResource('user-db') }));
    assert.equal(res.status, 200);
    // both slow spans were annotated (at once: their profile was there) and reached the sink
    await sink.waitForSpans(14, 15000);

    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
  });

  after(async () => {
    if (browser) await browser.close();
    if (hs) {
      const r = await hs.stop();
      assert.equal(r.code, 0, `hotspan exit code on SIGTERM\n${r.logs.join('\n')}`);
    }
    if (sink) await sink.stop();
    if (psink) await psink.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function open(path) {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(`${path}: ${m.text()}`); });
    page.on('pageerror', (e) => consoleErrors.push(`${path}: ${e.message}`));
    const resp = await page.goto(`http://127.0.0.1:${hs.ports.admin}${path}`);
    return { page, resp };
  }

  it('lists the slow spans, newest first, with service, name, match and N+1 count', async () => {
    const { page, resp } = await open('/ui');
    assert.equal(resp.status(), 200);
    assert.match(resp.headers()['content-type'], /^text\/html/);
    const text = await page.innerText('main');
    assert.match(text, /Recent slow spans/);
    assert.doesNotMatch(text, /No slow spans yet/);
    const rows = await page.$$eval('table.spans tbody tr',
      (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.innerText.trim())));
    assert.equal(rows.length, 2, JSON.stringify(rows));
    // annotated in the batch's order: the XSS span after findByEmail, so listed above it
    assert.deepEqual(rows.map((r) => r[2]), [XSS_SPAN, FIND]);
    const row = rows.find((r) => r[2] === FIND);
    assert.ok(row, `a row for ${FIND}: ${JSON.stringify(rows)}`);
    assert.equal(row[1], 'user-db');
    assert.match(row[3], /^612 ms$/);
    assert.equal(row[4], 'window');
    assert.match(row[5], /^UserRepository\.loadPreferences \d+%$/);
    assert.equal(row[6], '12');
    if (process.env.HOTSPAN_UI_SHOTS) await page.screenshot({ path: join(process.env.HOTSPAN_UI_SHOTS, 'ui-list.png') });
    await page.close();
  });

  it('the span page draws an SVG flame graph naming findByEmail and loadPreferences', async () => {
    const { page } = await open('/ui');
    await page.click(`a[href="/ui/span/${slow.spanId}"] >> nth=0`);
    await page.waitForURL(`**/ui/span/${slow.spanId}`);
    assert.equal(await page.innerText('#span-name'), FIND);
    const names = await page.$$eval('svg#flame text', (ts) => ts.map((t) => t.textContent));
    assert.ok(names.includes(FIND), `flame graph frames: ${JSON.stringify(names)}`);
    assert.ok(names.includes(LOADP), `flame graph frames: ${JSON.stringify(names)}`);
    // the hot path is outlined, from the root down to the query
    const hot = await page.$$eval('svg#flame svg.hot > text', (ts) => ts.map((t) => t.textContent));
    assert.deepEqual(hot, ['all', FIND, LOADP, 'pg.Client.query']);
    // frames are real boxes with width, the root the widest
    const box = await page.locator('svg#flame').boundingBox();
    assert.ok(box && box.width > 600 && box.height > 50, JSON.stringify(box));
    const annotations = await page.innerText('#annotations');
    assert.match(annotations, /N\+1: 12 alike children: SELECT \* FROM preferences WHERE user_id = \?/);
    assert.match(annotations, /Hot path\s+UserRepository\.findByEmail > UserRepository\.loadPreferences > pg\.Client\.query/);
    const pyro = await page.getAttribute('#pyroscope', 'href');
    assert.match(pyro, /^http:\/\/pyroscope\.example:4040\/\?query=.*user-db/);
    const grafana = await page.getAttribute('#grafana', 'href');
    assert.ok(grafana.startsWith('http://grafana.example:3000/explore?'), grafana);
    assert.ok(decodeURIComponent(grafana).includes(`"query":"${slow.traceId}"`), grafana);

    // HOTSPAN_UI_SHOTS=<dir> keeps the screenshot (to look at the page); else the temp dir
    const shot = join(process.env.HOTSPAN_UI_SHOTS || dir, 'ui-span.png');
    await page.screenshot({ path: shot, fullPage: true });
    const png = readFileSync(shot);
    assert.ok(statSync(shot).size > 2000, `screenshot of ${statSync(shot).size} bytes`);
    assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    await page.close();
  });

  it('client-sent span and function names render as text, not markup', async () => {
    const { page } = await open('/ui');
    assert.ok((await page.innerText('table.spans')).includes(XSS_SPAN));
    await page.click(`a[href="/ui/span/${xss.spanId}"] >> nth=0`);
    await page.waitForURL(`**/ui/span/${xss.spanId}`);
    assert.equal(await page.innerText('#span-name'), XSS_SPAN);
    const names = await page.$$eval('svg#flame text', (ts) => ts.map((t) => t.textContent));
    assert.ok(names.includes(XSS_FN), `the function name, as text: ${JSON.stringify(names)}`);
    assert.equal(await page.evaluate(() => document.querySelectorAll('script, img').length), 0);
    assert.equal(await page.evaluate(() => window.__xss), undefined);
    await page.close();
  });

  it('an unknown span id is a 404 page; a POST is refused', async () => {
    const { page, resp } = await open('/ui/span/0123456789abcdef');
    assert.equal(resp.status(), 404);
    assert.match(await page.innerText('main'), /Not found/);
    await page.close();
    consoleErrors.splice(0); // the 404 itself is logged by the browser as a failed resource
    const r = await request({ port: hs.ports.admin, method: 'POST', path: '/ui', body: 'x' });
    assert.equal(r.status, 405);
  });

  it('the browser logged no errors, and the ring is accounted in /metrics', async () => {
    assert.deepEqual(consoleErrors, []);
    const r = await request({ port: hs.ports.admin, method: 'GET', path: '/metrics' });
    const m = /^hotspan_correlator_ui_bytes\{[^}]*\} (\d+)/m.exec(r.body.toString());
    assert.ok(m && Number(m[1]) > 1000, 'hotspan_correlator_ui_bytes counts the two entries');
  });
});

// The README's first command end to end: `hotspan demo` on the embedded default config (moved to
// free ports) prints an enriched slow span, and /ui lists it with a flame graph naming
// findByEmail, as a newcomer opening the URL from the banner would see it.
describe('/ui while `hotspan demo` runs', () => {
  let proc;
  let browser;
  let dir;
  let stdout = '';
  let stderr = '';

  after(async () => {
    if (browser) await browser.close();
    if (proc && proc.exitCode === null) proc.kill('SIGKILL');
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('lists the demo\'s enriched findByEmail span, and its flame graph names findByEmail', async () => {
    assert.ok(existsSync(CHROMIUM), `chromium not found at ${CHROMIUM}: run scripts/setup`);
    dir = mkdtempSync(join(tmpdir(), 'hotspan-ui-demo-'));
    const cfg = await demoConfig();
    proc = spawn(HOTSPAN_BIN, ['demo', '-c', cfg.file, '--seed', '7'], { stdio: ['ignore', 'pipe', 'pipe'] });
    proc.stdout.setEncoding('utf8').on('data', (d) => { stdout += d; });
    proc.stderr.setEncoding('utf8').on('data', (d) => { stderr += d; });
    const line = await waitFor(
      () => stdout.split('\n').find((l) => /^user-db {2}UserRepository\.findByEmail {2}\d+ ms — .*N\+1: \d+ queries/.test(l)),
      45000, () => 'an enriched user-db findByEmail line on stdout', 100).catch((e) => { throw new Error(`${e.message}\nstdout:\n${stdout}\nstderr:\n${stderr.slice(-3000)}`); });
    const trace = /trace=([0-9a-f]{32})/.exec(line)[1];

    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    const resp = await page.goto(`http://127.0.0.1:${cfg.ports.admin}/ui`);
    assert.equal(resp.status(), 200);
    const rows = await page.$$eval('table.spans tbody tr', (trs) => trs.map((tr) => ({
      cells: [...tr.querySelectorAll('td')].map((td) => td.innerText.trim()),
      href: tr.querySelector('a')?.getAttribute('href'),
    })));
    const row = rows.find((r) => r.cells[1] === 'user-db' && r.cells[2] === 'UserRepository.findByEmail');
    assert.ok(row, `no user-db findByEmail row in ${JSON.stringify(rows.map((r) => r.cells))}`);
    // the trace of the printed line is among the listed spans' pages
    const pages = await Promise.all(rows.map((r) => request({ port: cfg.ports.admin, method: 'GET', path: r.href })));
    assert.ok(pages.some((p) => p.body.toString().includes(trace)), `trace ${trace} on no listed span's page`);
    await page.screenshot({ path: join(dir, 'demo-ui.png'), fullPage: true });
    assert.ok(statSync(join(dir, 'demo-ui.png')).size > 2000);

    // the span of the printed line has its own page, whose flame graph names findByEmail
    await page.goto(`http://127.0.0.1:${cfg.ports.admin}${row.href}`);
    const names = await page.$$eval('svg#flame text', (ts) => ts.map((t) => t.textContent));
    assert.ok(names.some((n) => /findByEmail/.test(n)), `flame graph frames: ${JSON.stringify(names)}`);
    assert.ok(names.some((n) => /loadPreferences/.test(n)), `flame graph frames: ${JSON.stringify(names)}`);
    const annotations = await page.innerText('#annotations');
    assert.match(annotations, /N\+1/);
    assert.deepEqual(errors, []);
    await page.close();

    proc.kill('SIGTERM');
    const code = await new Promise((r) => proc.on('close', r));
    assert.equal(code, 0, stderr.slice(-3000));
    const san = sanitizerReport(stderr);
    assert.equal(san, null, san || '');
  });
});

describe('/ui with two correlators', () => {
  it('the first to start serves /ui; the other says so and keeps no ring', async () => {
    const hs = await startHotspan(`receivers:
  otlp: {protocols: {http: {endpoint: 127.0.0.1:0}}}
  otlp/b: {protocols: {http: {endpoint: 127.0.0.1:0}}}
  pyroscope: {endpoint: 127.0.0.1:0}
processors:
  correlator: {slow: {threshold: 300ms}}
  correlator/b: {slow: {threshold: 300ms}}
exporters:
  debug: {verbosity: basic}
service:
  telemetry:
    admin: 127.0.0.1:0
  pipelines:
    traces: {receivers: [otlp], processors: [correlator], exporters: [debug]}
    traces/b: {receivers: [otlp/b], processors: [correlator/b], exporters: [debug]}
    profiles: {receivers: [pyroscope], processors: [correlator, correlator/b], exporters: [debug]}
`, { waitFor: ['otlp', 'otlp/b', 'pyroscope', 'admin'] });
    try {
      const warn = await hs.waitForLog(/level=warn .*\/ui is served by another correlator/);
      const r = await request({ port: hs.ports.admin, method: 'GET', path: '/ui' });
      assert.equal(r.status, 200);
      const warned = hs.logs.filter((l) => /\/ui is served by another correlator/.test(l));
      assert.equal(warned.length, 1, warned.join('\n'));
      const other = /component=(correlator(?:\/b)?) /.exec(warn)[1];
      const m = await fetchMetrics(hs.ports.admin);
      const ui = Object.keys(m).filter((k) => k.startsWith('hotspan_correlator_ui_bytes{'));
      assert.equal(ui.length, 1, `one ring, the served one: ${ui}`);
      assert.ok(!ui[0].includes(`processor="${other}"`), `${other} warned but kept its ring`);
    } finally {
      const res = await hs.stop();
      assert.equal(res.code, 0);
    }
  });
});
