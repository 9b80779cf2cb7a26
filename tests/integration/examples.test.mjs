// The sample deployments in config/examples/: `hotspan validate -c` accepts every hotspan config
// there (exit 0); a broken copy of each (a key misspelled, a bad value) exits 2 naming FILE:LINE
// and the key; the Grafana provisioning YAML parses and the data source uids that
// tracesToProfiles points at exist.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runHotspan } from './lib/hotspan.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const EXAMPLES = resolve(here, '../../config/examples');

/** Every *.yaml under config/examples/, recursively. */
function yamlFiles(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...yamlFiles(p));
    else if (/\.ya?ml$/.test(name)) out.push(p);
  }
  return out;
}

// A hotspan config is one with the top-level sections hotspan reads; the others are Grafana's,
// Tempo's and docker compose's.
const isHotspanConfig = (text) => /^receivers:/m.test(text) && /^service:/m.test(text) &&
  /^exporters:/m.test(text);

const all = yamlFiles(EXAMPLES);
const configs = all.filter((f) => isHotspanConfig(readFileSync(f, 'utf8')));

/** Parses YAML files with python3's yaml module (PyYAML): {file: value}, or null without it. */
function parseYaml(files) {
  const script = 'import json, sys, yaml\n' +
    'print(json.dumps({f: yaml.safe_load(open(f)) for f in sys.argv[1:]}))\n';
  try {
    return JSON.parse(execFileSync('python3', ['-c', script, ...files], { encoding: 'utf8' }));
  } catch (e) {
    if (/No module named|ENOENT/.test(String(e.stderr || e.message))) return null;
    throw e;
  }
}

/** The 1-based line of the first line of `text` matching re. */
function lineOf(text, re) {
  const i = text.split('\n').findIndex((l) => re.test(l));
  assert.ok(i >= 0, `no line matches ${re}`);
  return i + 1;
}

describe('config/examples', () => {
  it('holds the sidecar, gateway, first tier and Grafana stack configs', () => {
    const names = configs.map((f) => relative(EXAMPLES, f)).sort();
    for (const want of ['sidecar.yaml', 'gateway.yaml', 'first-tier.yaml', 'grafana/hotspan.yaml']) {
      assert.ok(names.includes(want), `config/examples/${want} is missing (have ${names})`);
    }
    for (const want of ['grafana/docker-compose.yaml', 'grafana/datasources.yaml',
      'grafana/tempo.yaml']) {
      assert.ok(all.includes(join(EXAMPLES, want)), `config/examples/${want} is missing`);
    }
  });

  for (const file of configs) {
    const name = relative(EXAMPLES, file);

    it(`validate accepts ${name} (exit 0)`, async () => {
      const r = await runHotspan(['validate', '-c', file]);
      assert.equal(r.code, 0, `validate ${name}: exit ${r.code}\n${r.stdout}${r.stderr}`);
    });

    it(`validate names FILE:LINE and the key in a broken copy of ${name} (exit 2)`, async () => {
      const text = readFileSync(file, 'utf8');
      // a key misspelled: the first `endpoint:` under the receivers; a bad value: the
      // correlator's max_wait, or (a first tier has no correlator) the DNS resolver's interval
      const keyLine = lineOf(text, /^\s+endpoint:/);
      let broken = text.split('\n');
      broken[keyLine - 1] = broken[keyLine - 1].replace('endpoint:', 'endpiont:');
      const [dkey, dpath] = /^\s+max_wait: /m.test(text)
        ? ['max_wait', 'processors\\.correlator\\.max_wait']
        : ['interval', 'exporters\\.load_balancing\\.resolver\\.dns\\.interval'];
      const valueLine = lineOf(text, new RegExp(`^\\s+${dkey}: `));
      broken[valueLine - 1] = broken[valueLine - 1].replace(new RegExp(`${dkey}: \\S+`), `${dkey}: 30x`);
      broken = broken.join('\n');
      const dir = mkdtempSync(join(tmpdir(), 'hotspan-examples-'));
      try {
        const copy = join(dir, name.replace('/', '-'));
        writeFileSync(copy, broken);
        const r = await runHotspan(['validate', '-c', copy]);
        const out = r.stdout + r.stderr;
        assert.equal(r.code, 2, `validate broken ${name}: exit ${r.code}\n${out}`);
        const esc = copy.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
        assert.match(out, new RegExp(`${esc}:${keyLine}:\\d+: [\\w./]*endpiont: unknown key`),
          `the misspelled key at line ${keyLine} is not named\n${out}`);
        assert.match(out, new RegExp(`${esc}:${valueLine}:\\d+: ${dpath}: "30x" is not a duration`),
          `the bad value at line ${valueLine} is not named\n${out}`);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }

  it('the commented-out tls:, auth: and admin_auth: blocks of gateway.yaml use known keys', async () => {
    const text = readFileSync(join(EXAMPLES, 'gateway.yaml'), 'utf8');
    // uncomment the blocks (and drop their trailing remarks), keeping the indentation
    const on = text.split('\n').map((l) => {
      const m = /^(\s*)# ((?:tls|auth|admin_auth):.*|\s{2}\w+:.*)$/.exec(l);
      return m ? `${m[1]}${m[2].replace(/\s+#.*$/, '')}` : l;
    }).join('\n');
    assert.ok((on.match(/^\s+tls:$/gm) || []).length >= 3, 'gateway.yaml lost its tls: blocks');
    assert.ok((on.match(/^\s+auth:$/gm) || []).length >= 2, 'gateway.yaml lost its auth: blocks');
    assert.match(on, /^\s+admin_auth:$/m, 'gateway.yaml lost its admin_auth: block');
    const dir = mkdtempSync(join(tmpdir(), 'hotspan-examples-'));
    try {
      const copy = join(dir, 'gateway-tls-auth.yaml');
      writeFileSync(copy, on);
      const r = await runHotspan(['validate', '-c', copy]);
      const out = r.stdout + r.stderr;
      // the certificate and token files do not exist here; everything else must be accepted
      const errors = out.split('\n').filter((l) => l.startsWith(copy) && !/: ok$/.test(l));
      const other = errors.filter((l) => !/cannot read|No such file|does not exist/.test(l));
      assert.deepEqual(other, [], `uncommented tls:/auth: blocks are not valid config:\n${out}`);
      assert.ok([0, 2].includes(r.code), `exit ${r.code}\n${out}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the Grafana provisioning parses and tracesToProfiles points at data sources that exist',
    (t) => {
      const grafana = join(EXAMPLES, 'grafana');
      const files = yamlFiles(grafana);
      const parsed = parseYaml(files);
      if (!parsed) {
        t.skip('python3 with PyYAML (python3-yaml) is not installed');
        return;
      }
      for (const f of files) assert.ok(parsed[f], `${relative(EXAMPLES, f)} parsed to nothing`);
      const ds = parsed[join(grafana, 'datasources.yaml')].datasources;
      assert.ok(Array.isArray(ds) && ds.length >= 2, 'datasources.yaml lists no data sources');
      const byUid = new Map(ds.map((d) => [d.uid, d]));
      const tempo = ds.find((d) => d.type === 'tempo');
      assert.ok(tempo, 'no Tempo data source');
      const t2p = tempo.jsonData && tempo.jsonData.tracesToProfiles;
      assert.ok(t2p, 'the Tempo data source has no tracesToProfiles');
      const target = byUid.get(t2p.datasourceUid);
      assert.ok(target, `tracesToProfiles.datasourceUid ${t2p.datasourceUid} names no data source`);
      assert.equal(target.type, 'grafana-pyroscope-datasource');
      assert.equal(t2p.profileTypeId, 'process_cpu:cpu:nanoseconds:cpu:nanoseconds');
      assert.deepEqual(t2p.tags, [{ key: 'service.name', value: 'service_name' }]);
      assert.equal(t2p.customQuery, true);
      assert.match(t2p.query, /service_name="\$\{__span\.tags\["service\.name"\]\}"/);

      // the compose file mounts what exists, and hotspan's /ui links to the Tempo uid above
      const compose = parsed[join(grafana, 'docker-compose.yaml')];
      for (const svc of ['hotspan', 'tempo', 'pyroscope', 'grafana']) {
        assert.ok(compose.services[svc], `docker-compose.yaml has no ${svc} service`);
      }
      for (const svc of Object.values(compose.services)) {
        for (const v of svc.volumes || []) {
          const src = v.split(':')[0];
          if (src.startsWith('./')) {
            assert.ok(statSync(join(grafana, src)).isFile(), `compose mounts missing ${src}`);
          }
        }
      }
      const build = compose.services.hotspan.build;
      assert.ok(statSync(join(grafana, build.context, build.dockerfile)).isFile(),
        'the hotspan image has no Dockerfile');
      const hs = parsed[join(grafana, 'hotspan.yaml')];
      assert.ok(byUid.has(hs.processors.correlator.ui.tempo_datasource),
        'correlator.ui.tempo_datasource names no provisioned data source');
      assert.equal(hs.exporters['otlp/tempo'].endpoint, 'http://tempo:4318');
      const tempoCfg = parsed[join(grafana, 'tempo.yaml')];
      assert.equal(tempoCfg.distributor.receivers.otlp.protocols.http.endpoint, '0.0.0.0:4318');
      assert.equal(new URL(tempo.url).port, String(tempoCfg.server.http_listen_port));
    });
});
