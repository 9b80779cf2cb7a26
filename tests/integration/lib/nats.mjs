// A JetStream cluster of the real nats-server (Debian's) on loopback for tests: N nodes
// (default 3), each with its own config file and store in one temp dir, ports picked by the
// test, ready once every running node agrees on a JetStream meta leader and answers /healthz.
// One node can be killed and restarted (same ports, same store); stop() ends them all.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';
import { waitFor } from './wait.mjs';

export const NATS_SERVER = process.env.NATS_SERVER || 'nats-server';

/** nats-server's version ("2.9.10"), or null when it is not installed. */
export function natsServerVersion() {
  try {
    const out = execFileSync(NATS_SERVER, ['--version'], { encoding: 'utf8' });
    return /v?(\d+\.\d+\.\d+)/.exec(out)?.[1] ?? null;
  } catch {
    return null;
  }
}

/** `n` distinct free loopback ports (bound to port 0, then released: a small race, fine here). */
async function freePorts(n) {
  const servers = [];
  try {
    for (let i = 0; i < n; i++) {
      const s = net.createServer();
      await new Promise((res, rej) => { s.once('error', rej); s.listen(0, '127.0.0.1', res); });
      servers.push(s);
    }
    return servers.map((s) => s.address().port);
  } finally {
    await Promise.all(servers.map((s) => new Promise((res) => s.close(res))));
  }
}

function nodeConfig(node, all, clusterName, storeDir) {
  const routes = all.filter((o) => o !== node)
    .map((o) => `nats-route://127.0.0.1:${o.clusterPort}`).join(', ');
  return [
    `server_name: ${node.name}`,
    `listen: 127.0.0.1:${node.port}`,
    `http: 127.0.0.1:${node.httpPort}`,
    // small limits: tests write little, and three nodes share one machine with other tests
    `jetstream { store_dir: "${storeDir}", max_memory_store: 64MB, max_file_store: 1GB }`,
    `cluster { name: ${clusterName}, listen: 127.0.0.1:${node.clusterPort}, routes: [${routes}] }`,
    '',
  ].join('\n');
}

async function getJson(port, path) {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, body: await res.json().catch(() => null) };
}

/**
 * Starts the cluster and waits until it is ready. Returns
 * { nodes: [{name, port, clusterPort, httpPort, url, running, log}], urls, ready(), leader(),
 *   jsz(i, query), kill(i), restart(i), stop(), dir }.
 */
export async function startNatsCluster({ nodes: count = 3, name = 'hotspan', readyMs = 30000 } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'hotspan-nats-'));
  const ports = await freePorts(count * 3);
  const nodes = [];
  for (let i = 0; i < count; i++) {
    const [port, clusterPort, httpPort] = ports.slice(i * 3, i * 3 + 3);
    nodes.push({ name: `n${i + 1}`, port, clusterPort, httpPort, url: `nats://127.0.0.1:${port}`,
      running: false, proc: null, log: '' });
  }
  for (const node of nodes) {
    const store = join(dir, node.name);
    mkdirSync(store);
    node.config = join(dir, `${node.name}.conf`);
    writeFileSync(node.config, nodeConfig(node, nodes, name, store));
  }

  function launch(node) {
    const proc = spawn(NATS_SERVER, ['-c', node.config], { stdio: ['ignore', 'ignore', 'pipe'] });
    node.proc = proc;
    node.running = true;
    node.exited = new Promise((res) => proc.on('exit', (code, signal) => {
      node.running = false;
      res({ code, signal });
    }));
    proc.stderr.setEncoding('utf8').on('data', (d) => {
      node.log += d;
      if (node.log.length > 200000) node.log = node.log.slice(-100000);
    });
    proc.on('error', (e) => { node.log += `spawn error: ${e.message}\n`; });
  }

  /** The meta leader if every running node names the same one and is healthy, else null. */
  async function agreedLeader() {
    const live = nodes.filter((n) => n.running);
    if (live.length === 0) return null;
    let leader = null;
    for (const n of live) {
      try {
        const h = await getJson(n.httpPort, '/healthz');
        const j = await getJson(n.httpPort, '/jsz');
        const l = j.body?.meta_cluster?.leader;
        if (h.status !== 200 || !l) return null;
        if (leader && l !== leader) return null;
        leader = l;
      } catch {
        return null; // not listening yet
      }
    }
    return live.some((n) => n.name === leader) ? leader : null;
  }

  const cluster = {
    dir,
    nodes,
    urls: nodes.map((n) => n.url),
    async ready(ms = readyMs) {
      return waitFor(agreedLeader, ms, () => `a JetStream meta leader agreed by ${nodes
        .filter((n) => n.running).map((n) => n.name).join(', ')}; logs:\n${nodes
        .map((n) => `--- ${n.name}\n${n.log.slice(-1500)}`).join('\n')}`, 100);
    },
    leader: agreedLeader,
    /** /jsz of node i (query e.g. '?streams=true&consumers=true'). */
    async jsz(i, query = '') {
      return (await getJson(nodes[i].httpPort, `/jsz${query}`)).body;
    },
    indexOf(nameOrPort) {
      return nodes.findIndex((n) => n.name === nameOrPort || n.port === Number(nameOrPort));
    },
    /** Kills node i (SIGKILL by default: no goodbye to the cluster) and waits for its exit. */
    async kill(i, signal = 'SIGKILL') {
      const node = nodes[i];
      if (!node.running) return;
      node.proc.kill(signal);
      await node.exited;
    },
    /** Starts node i again on its ports and store; waits for the cluster to agree again. */
    async restart(i, ms = readyMs) {
      if (nodes[i].running) throw new Error(`${nodes[i].name} is running`);
      launch(nodes[i]);
      return cluster.ready(ms);
    },
    async stop() {
      await Promise.all(nodes.map(async (n) => {
        if (!n.running) return;
        n.proc.kill('SIGTERM');
        const t = setTimeout(() => n.proc.kill('SIGKILL'), 5000);
        await n.exited;
        clearTimeout(t);
      }));
      rmSync(dir, { recursive: true, force: true });
    },
  };

  nodes.forEach(launch);
  try {
    await cluster.ready();
  } catch (e) {
    await cluster.stop();
    throw e;
  }
  return cluster;
}
