// pprof profiles for the tests: builds them with DataDog's `pprof-format` from a small spec
// (stacks of named functions with known values, optional `span_id` labels), encodes and gzips
// them, computes the per-function self/total a correct summary must report, and decodes
// received bytes back into the same shape for assertions. Also runs `go tool pprof -top`.
import { gzipSync, gunzipSync } from 'node:zlib';
import { createHash } from 'node:crypto';
import { execFile } from 'node:child_process';
import { existsSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, delimiter } from 'node:path';
import {
  Profile, Function as PFunction, Location, Line, Sample, ValueType, StringTable, Label,
  emptyTableToken,
} from 'pprof-format';

export { Profile, PFunction as Function, Location, Line, Sample, ValueType, StringTable, Label,
  emptyTableToken };

export const sha256 = (buf) => createHash('sha256').update(buf).digest('hex');
export const isGzip = (buf) => buf.length >= 2 && buf[0] === 0x1f && buf[1] === 0x8b;
export const maybeGunzip = (buf) => (isGzip(buf) ? gunzipSync(buf) : Buffer.from(buf));

/**
 * Builds a pprof Profile.
 *   sampleTypes: [[type, unit], ...] (default samples/count + cpu/nanoseconds, Go's CPU shape)
 *   periodType: [type, unit]; period
 *   samples: [{stack: ['main', 'handle', 'leaf'] (ROOT FIRST, as humans read), values: [...],
 *              labels: {span_id: '0123456789abcdef', ...} (string labels)}]
 *   files: {functionName: 'file.js'} (default `<name>.go`)
 *   timeNanos / durationNanos (BigInt or number; default now, 10 s)
 * Function and location ids are assigned 1.. per distinct function (one line per location).
 */
export function buildProfile({
  sampleTypes = [['samples', 'count'], ['cpu', 'nanoseconds']],
  periodType = ['cpu', 'nanoseconds'],
  period = 10000000,
  samples,
  files = {},
  timeNanos = BigInt(Date.now()) * 1000000n,
  durationNanos = 10000000000n,
  defaultSampleType = null,
} = {}) {
  const st = new StringTable();
  const funcIds = new Map();
  const functions = [];
  const locations = [];
  const fid = (name) => {
    if (!funcIds.has(name)) {
      const id = functions.length + 1;
      funcIds.set(name, id);
      functions.push(new PFunction({
        id, name: st.dedup(name), systemName: st.dedup(name),
        filename: st.dedup(files[name] ?? `${name}.go`), startLine: 10 * id,
      }));
      locations.push(new Location({ id, line: [new Line({ functionId: id, line: 10 * id + 1 })] }));
    }
    return funcIds.get(name);
  };
  const pSamples = samples.map((s) => new Sample({
    locationId: [...s.stack].reverse().map(fid), // leaf first on the wire
    value: s.values,
    label: Object.entries(s.labels || {}).map(([k, v]) => new Label({ key: st.dedup(k), str: st.dedup(v) })),
  }));
  return new Profile({
    sampleType: sampleTypes.map(([t, u]) => new ValueType({ type: st.dedup(t), unit: st.dedup(u) })),
    sample: pSamples,
    location: locations,
    function: functions,
    stringTable: st,
    timeNanos,
    durationNanos,
    periodType: new ValueType({ type: st.dedup(periodType[0]), unit: st.dedup(periodType[1]) }),
    period,
    defaultSampleType: defaultSampleType ? st.dedup(defaultSampleType) : 0,
  });
}

/** Encodes a Profile (or a buildProfile spec); gzipped unless gzip: false. */
export function encodeProfile(p, { gzip = true } = {}) {
  const prof = p instanceof Profile ? p : buildProfile(p);
  const raw = Buffer.from(prof.encode());
  return gzip ? gzipSync(raw) : raw;
}

/**
 * What a correct summary of a buildProfile spec says: {types: [[t,u]], totals: [..],
 * functions: {name: {self: [..], total: [..]}}, spans: {id: [..]}, samples}, values as BigInt.
 * self = samples whose leaf is the function; total = samples with it anywhere (counted once).
 */
export function expectedSummary({ sampleTypes = [['samples', 'count'], ['cpu', 'nanoseconds']], samples }) {
  const n = sampleTypes.length;
  const zero = () => new Array(n).fill(0n);
  const functions = {};
  const spans = {};
  const totals = zero();
  for (const s of samples) {
    const vals = s.values.map(BigInt);
    vals.forEach((v, i) => { totals[i] += v; });
    const leaf = s.stack[s.stack.length - 1];
    for (const name of new Set(s.stack)) {
      functions[name] ??= { self: zero(), total: zero() };
      vals.forEach((v, i) => { functions[name].total[i] += v; });
    }
    vals.forEach((v, i) => { functions[leaf].self[i] += v; });
    const sid = s.labels?.span_id;
    if (sid) {
      spans[sid] ??= zero();
      vals.forEach((v, i) => { spans[sid][i] += v; });
    }
  }
  return { types: sampleTypes, totals, functions, spans, samples: samples.length };
}

/** Decodes pprof bytes (gzipped or not) into the expectedSummary() shape, straight from the
 * wire (independent of hotspan's own decoder): functions keyed by name; byNameFile keyed by
 * `name<TAB>file` (how hotspan's summary tells functions apart). A location's lines are
 * expanded, its first line being the leaf (inlined) frame. */
export function summarizePprof(buf) {
  const p = Profile.decode(maybeGunzip(buf));
  const str = (i) => p.stringTable.strings[Number(i)];
  const n = p.sampleType.length;
  const zero = () => new Array(n).fill(0n);
  const fnName = new Map(p.function.map((f) => [String(f.id), str(f.name)]));
  const fnKey = new Map(p.function.map((f) => [String(f.id), `${str(f.name)}\t${str(f.filename)}`]));
  const locFns = new Map(p.location.map((l) => [String(l.id),
    l.line.map((ln) => fnName.get(String(ln.functionId)))]));
  const locKeys = new Map(p.location.map((l) => [String(l.id),
    l.line.map((ln) => fnKey.get(String(ln.functionId)))]));
  const functions = {};
  const byNameFile = {};
  const spans = {};
  const totals = zero();
  const labelKeys = new Set();
  for (const s of p.sample) {
    const vals = s.value.map((v) => BigInt(v));
    vals.forEach((v, i) => { totals[i] += v; });
    // leaf first; a location's lines: the first is the innermost (inlined) frame
    const frames = s.locationId.flatMap((id) => locFns.get(String(id)) || []);
    if (frames.length) {
      const leaf = frames[0];
      for (const name of new Set(frames)) {
        functions[name] ??= { self: zero(), total: zero() };
        vals.forEach((v, i) => { functions[name].total[i] += v; });
      }
      vals.forEach((v, i) => { functions[leaf].self[i] += v; });
      const keys = s.locationId.flatMap((id) => locKeys.get(String(id)) || []);
      for (const k of new Set(keys)) {
        byNameFile[k] ??= { self: zero(), total: zero() };
        vals.forEach((v, i) => { byNameFile[k].total[i] += v; });
      }
      vals.forEach((v, i) => { byNameFile[keys[0]].self[i] += v; });
    }
    for (const l of s.label) {
      const k = str(l.key);
      labelKeys.add(k);
      if (k === 'span_id' && Number(l.str)) {
        const sid = str(l.str);
        spans[sid] ??= zero();
        vals.forEach((v, i) => { spans[sid][i] += v; });
      }
    }
  }
  return {
    types: p.sampleType.map((t) => [str(t.type), str(t.unit)]),
    periodType: p.periodType ? [str(p.periodType.type), str(p.periodType.unit)] : null,
    period: BigInt(p.period),
    timeNanos: BigInt(p.timeNanos),
    durationNanos: BigInt(p.durationNanos),
    totals, functions, byNameFile, spans, samples: p.sample.length, labelKeys,
  };
}

/** BigInt arrays → decimal string arrays (the file exporter's JSON shape). */
export const strs = (arr) => arr.map((v) => String(v));

/** Path of the go binary (PATH, then Debian's /usr/lib/go/bin), or null. */
export function findGo() {
  for (const dir of (process.env.PATH || '').split(delimiter)) {
    if (dir && existsSync(join(dir, 'go'))) return join(dir, 'go');
  }
  for (const p of ['/usr/lib/go/bin/go', '/usr/local/go/bin/go']) if (existsSync(p)) return p;
  return null;
}

/**
 * `go tool pprof -top` on these bytes: resolves {rows: {function: flat (Number, in `unit`)},
 * text}. sampleIndex picks the value column; unit 'ns' etc. (pprof's -unit; counts need none).
 */
export function goPprofTop(go, bytes, { sampleIndex = null, unit = null } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'hotspan-pprof-'));
  const file = join(dir, 'profile.pb.gz');
  writeFileSync(file, bytes);
  const args = ['tool', 'pprof', '-top', '-nodecount=1000', '-symbolize=none'];
  if (sampleIndex !== null) args.push(`-sample_index=${sampleIndex}`);
  if (unit) args.push(`-unit=${unit}`);
  args.push(file);
  return new Promise((resolve, reject) => {
    execFile(go, args, {
      timeout: 60000,
      env: { ...process.env, HOME: dir, PPROF_TMPDIR: dir, GOFLAGS: '', GOCACHE: join(dir, 'cache') },
    }, (err, stdout, stderr) => {
      rmSync(dir, { recursive: true, force: true });
      if (err) { reject(new Error(`go ${args.join(' ')} failed: ${err.message}\n${stderr}`)); return; }
      const rows = {};
      // "      30ms 50.00% 50.00%       30ms 50.00%  findByEmail"
      const re = /^\s*([-\d.]+)([a-zA-Z]*)\s+[-\d.]+%\s+[-\d.]+%\s+([-\d.]+)([a-zA-Z]*)\s+[-\d.]+%\s+(.+?)\s*$/;
      for (const line of stdout.split('\n')) {
        const m = re.exec(line);
        if (m) rows[m[5]] = { flat: Number(m[1]), flatUnit: m[2], cum: Number(m[3]), cumUnit: m[4] };
      }
      resolve({ rows, text: stdout });
    });
  });
}
