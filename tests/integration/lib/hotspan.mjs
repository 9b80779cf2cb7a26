// Starts the real hotspan binary ($HOTSPAN_BIN) on a config written to a temp file, follows
// its stderr log, and finds the ports it listens on from the `listening on HOST:PORT` lines.
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

export const HOTSPAN_BIN = process.env.HOTSPAN_BIN || resolve(here, '../../../build/hotspan');
export const SANITIZE = ['on', '1', 'true', 'yes'].includes(
  String(process.env.HS_SANITIZE || '').toLowerCase());

const SANITIZER_MARKS = ['ERROR: AddressSanitizer', 'runtime error:', 'LeakSanitizer'];

/** Parses one logfmt line (`ts=... level=info component=otlp msg="listening on ..."`). */
export function parseLogLine(line) {
  const out = {};
  const re = /([A-Za-z_][\w.]*)=("((?:[^"\\]|\\.)*)"|\S*)/g;
  let m;
  while ((m = re.exec(line)) !== null) {
    out[m[1]] = m[3] !== undefined ? m[3].replace(/\\(.)/g, '$1') : m[2];
  }
  return out;
}

/** Checks the collected stderr of an ASan build for sanitizer reports. */
export function sanitizerReport(text) {
  if (!SANITIZE) return null;
  for (const mark of SANITIZER_MARKS) {
    const i = text.indexOf(mark);
    if (i >= 0) return text.slice(Math.max(0, i - 200), i + 3000);
  }
  return null;
}

/** Writes YAML to a fresh temp dir; returns {dir, file}. */
export function writeConfig(yamlText, name = 'hotspan.yaml') {
  const dir = mkdtempSync(join(tmpdir(), 'hotspan-it-'));
  const file = join(dir, name);
  writeFileSync(file, yamlText);
  return { dir, file };
}

/**
 * Runs `hotspan ARGS` to completion (for --version, validate, ...).
 * Returns {code, signal, stdout, stderr}.
 */
export function runHotspan(args, { env = {}, timeoutMs = 10000 } = {}) {
  return new Promise((resolveRun, reject) => {
    const proc = spawn(HOTSPAN_BIN, args, {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    proc.stdout.setEncoding('utf8').on('data', (d) => { stdout += d; });
    proc.stderr.setEncoding('utf8').on('data', (d) => { stderr += d; });
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`hotspan ${args.join(' ')} did not exit within ${timeoutMs} ms\n${stderr}`));
    }, timeoutMs);
    proc.on('error', (e) => { clearTimeout(timer); reject(e); });
    proc.on('close', (code, signal) => {
      clearTimeout(timer);
      const san = sanitizerReport(stderr);
      if (san) {
        reject(new Error(`sanitizer report from hotspan ${args.join(' ')}:\n${san}`));
        return;
      }
      resolveRun({ code, signal, stdout, stderr });
    });
  });
}

/**
 * Starts hotspan on `yamlText`. Waits until every listener it logs is up: the admin listener
 * (component=admin) and at least one receiver (`waitFor` lists the components to wait for;
 * default ['otlp', 'admin']). `wrap` runs it under a command that execs it, e.g.
 * ['prlimit', '--nofile=256:256', '--'] (the same process: signals reach hotspan). With `hosts`
 * (a file's path), hotspan runs in a user and mount namespace (`unshare -rm`, no root needed)
 * where that file is bind-mounted over /etc/hosts, so a test decides what names resolve to
 * (lib/netns.mjs rewrites it in place).
 * Returns {proc, ports: {otlp, admin, ...by component}, logs, stderr(), waitForLog(re), stop()}.
 */
export async function startHotspan(yamlText, {
  env = {}, waitFor = ['otlp', 'admin'], startTimeoutMs = 15000, args = [], wrap = [], hosts = null,
} = {}) {
  const { dir, file } = writeConfig(yamlText);
  // sh execs hotspan in the same process: signals and the exit code are hotspan's
  const inner = hosts
    ? ['unshare', '-rm', 'sh', '-c', 'mount --bind "$1" /etc/hosts && shift && exec "$0" "$@"',
      HOTSPAN_BIN, hosts, '-c', file, ...args]
    : [HOTSPAN_BIN, '-c', file, ...args];
  const argv = [...wrap, ...inner];
  const proc = spawn(argv[0], argv.slice(1), {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs = [];
  let stdout = '';
  let stderrText = '';
  const ports = {};
  const lineWaiters = new Set();
  let exited = null;
  const exitWaiters = new Set();

  const onLine = (line) => {
    logs.push(line);
    const f = parseLogLine(line);
    const m = /^listening on (?:\[([^\]]+)\]|([^:\s]+)):(\d+)/.exec(f.msg || '');
    if (m && f.component && ports[f.component] === undefined) ports[f.component] = Number(m[3]);
    for (const w of lineWaiters) w(line);
  };
  let partial = '';
  proc.stderr.setEncoding('utf8').on('data', (d) => {
    stderrText += d;
    partial += d;
    let nl;
    while ((nl = partial.indexOf('\n')) >= 0) {
      onLine(partial.slice(0, nl));
      partial = partial.slice(nl + 1);
    }
  });
  proc.stdout.setEncoding('utf8').on('data', (d) => { stdout += d; });
  proc.on('exit', (code, signal) => {
    if (partial) { onLine(partial); partial = ''; }
    exited = { code, signal };
    for (const w of exitWaiters) w(exited);
    for (const w of lineWaiters) w(null);
  });

  const waitExit = (timeoutMs) => new Promise((res) => {
    if (exited) { res(exited); return; }
    let timer;
    const w = (e) => { clearTimeout(timer); exitWaiters.delete(w); res(e); };
    timer = setTimeout(() => { exitWaiters.delete(w); res(null); }, timeoutMs);
    exitWaiters.add(w);
  });

  /** Resolves with the first log line (past or future) matching `re`. */
  const waitForLog = (re, timeoutMs = 10000) => new Promise((res, rej) => {
    const hit = logs.find((l) => re.test(l));
    if (hit) { res(hit); return; }
    let timer;
    const w = (line) => {
      if (line === null) {
        clearTimeout(timer); lineWaiters.delete(w);
        rej(new Error(`hotspan exited (${JSON.stringify(exited)}) before a log line matched ${re}\n` +
          logs.join('\n')));
      } else if (re.test(line)) {
        clearTimeout(timer); lineWaiters.delete(w); res(line);
      }
    };
    timer = setTimeout(() => {
      lineWaiters.delete(w);
      rej(new Error(`no log line matched ${re} within ${timeoutMs} ms\n${logs.join('\n')}`));
    }, timeoutMs);
    lineWaiters.add(w);
  });

  const cleanup = () => { try { rmSync(dir, { recursive: true, force: true }); } catch {} };

  let stopped = null;
  const stop = async ({ signal = 'SIGTERM', timeoutMs = 20000 } = {}) => {
    if (stopped) return stopped;
    stopped = (async () => {
      if (!exited) proc.kill(signal);
      let e = await waitExit(timeoutMs);
      let killed = false;
      if (!e) {
        killed = true;
        proc.kill('SIGKILL');
        e = await waitExit(5000);
      }
      cleanup();
      const result = { code: e ? e.code : null, signal: e ? e.signal : null, logs, stdout,
        stderr: stderrText };
      if (killed) {
        throw new Error(`hotspan did not exit within ${timeoutMs} ms of ${signal}; killed\n` +
          logs.slice(-40).join('\n'));
      }
      const san = sanitizerReport(stderrText);
      if (san) throw new Error(`sanitizer report from hotspan:\n${san}`);
      return result;
    })();
    return stopped;
  };

  // Wait for the listeners, or fail on an early exit / timeout.
  const ready = () => waitFor.every((c) => ports[c] !== undefined);
  if (!ready()) {
    await new Promise((res, rej) => {
      let timer;
      const w = (line) => {
        if (line === null) {
          clearTimeout(timer); lineWaiters.delete(w);
          cleanup();
          rej(new Error(`hotspan exited (${JSON.stringify(exited)}) during start-up; ` +
            `config:\n${yamlText}\nlog:\n${stderrText}`));
        } else if (ready()) {
          clearTimeout(timer); lineWaiters.delete(w); res();
        }
      };
      timer = setTimeout(() => {
        lineWaiters.delete(w);
        proc.kill('SIGKILL');
        cleanup();
        rej(new Error(`hotspan did not log listeners ${JSON.stringify(waitFor)} within ` +
          `${startTimeoutMs} ms (have ${JSON.stringify(ports)})\nlog:\n${stderrText}`));
      }, startTimeoutMs);
      lineWaiters.add(w);
      proc.on('error', (e) => { clearTimeout(timer); lineWaiters.delete(w); cleanup(); rej(e); });
    });
  }

  return {
    proc,
    ports,
    logs,
    configFile: file,
    stderr: () => stderrText,
    stdout: () => stdout,
    exited: () => exited,
    waitForLog,
    waitExit,
    stop,
  };
}
