// lib/apps.mjs: the test apps (apps/*.mjs: real SDKs sending to hotspan) run as child processes,
// and what the scale-out tests check of the seed N+1 workload (apps/nplus1.mjs) once it is
// through their tiers: every slow request's db span annotated as one hotspan would annotate it.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { attrs, durationMs } from './otlp.mjs';

const APPS_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', 'apps');

/** Runs apps/<script> with `env` added to ours until it exits 0: resolves {out, err}; rejects
 * with its output when it fails or outlives timeoutMs (then killed). */
export function runApp(script, env = {}, { timeoutMs = 60000, cwd } = {}) {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [join(APPS_DIR, script)], {
      cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    proc.stdout.setEncoding('utf8').on('data', (d) => { out += d; });
    proc.stderr.setEncoding('utf8').on('data', (d) => { err += d; });
    const timer = setTimeout(() => { proc.kill('SIGKILL'); reject(new Error(`${script} timed out\n${err}`)); }, timeoutMs);
    proc.on('error', (e) => { clearTimeout(timer); reject(e); });
    proc.on('close', (code) => {
      clearTimeout(timer);
      if (code !== 0) reject(new Error(`${script} exited ${code}\n${out}\n${err}`));
      else resolve({ out, err });
    });
  });
}

/** runApp for an app that ends by printing its report as one JSON line: resolves the report. */
export async function runAppReport(script, env = {}, opts = {}) {
  const { out, err } = await runApp(script, env, opts);
  try {
    return JSON.parse(out.trim().split('\n').pop());
  } catch {
    throw new Error(`${script} printed ${out}\n${err}`);
  }
}

/** The functions apps/nplus1.mjs's user-db spends a slow request in. */
export const USER_FNS = /findByEmail|loadPreferences/;

/** Spans the runs of apps/nplus1.mjs sent: per request its api and db spans and one per user. */
export const nplus1SpanCount = (runs) =>
  runs.reduce((n, r) => n + r.run.requests.reduce((m, q) => m + 2 + q.users, 0), 0);

/** Asserts that every slow request of the runs ({run, db, tenant}) reached the sink's `spans`
 * with its db span annotated as one hotspan annotates it: slow, matched, a user function
 * first among its top functions, the N+1 pattern with the request's user count. Returns how
 * many slow requests there were. */
export function assertNplus1Annotated(spans, runs) {
  const byId = new Map(spans.map((s) => [s.span.spanId, s]));
  let slow = 0;
  for (const { run, db, tenant } of runs) {
    for (const r of run.requests.filter((q) => q.kind === 'slow')) {
      slow += 1;
      const s = byId.get(r.dbSpanId);
      assert.ok(s, `slow ${tenant}/${db} span ${r.dbSpanId} reached the sink`);
      const a = attrs(s.span);
      const show = `${tenant}/${db} ${r.dbSpanId} (${durationMs(s.span)} ms): ${JSON.stringify(a)}`;
      assert.equal(a['hotspan.slow'], true, show);
      assert.ok(['span', 'window'].includes(a['profile.match']), `profile.match: ${show}`);
      assert.ok((a['profile.top_functions'] || []).some((f) => USER_FNS.test(f)), `top functions: ${show}`);
      assert.equal(a['hotspan.pattern'], 'n_plus_one', show);
      assert.equal(a['hotspan.n_plus_one.count'], r.users, show);
    }
  }
  return slow;
}
