// A JetStream cluster of the real nats-server (Debian's) on loopback for tests: N nodes
// (default 3), each with its own config file and store in one temp dir, ports picked by the
// test, ready once every running node agrees on a JetStream meta leader and answers /healthz.
// One node can be killed and restarted (same ports, same store); stop() ends them all. Also the
// NATS protocol spoken by hand, since no NATS client package is installed: a frame parser, a
// proxy that drops chosen frames (a lost ack), a one-message publisher, a stream's state.
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

// ---- speaking the NATS protocol ourselves (no NATS client package is installed) -------------

const CRLF = Buffer.from('\r\n');

/**
 * Splits a NATS protocol byte stream into frames: {op, line, raw} where raw is the whole frame
 * (control line, and for MSG/HMSG/PUB/HPUB the payload and its CRLF). `feed(chunk)` returns
 * the complete frames so far; a partial one waits for the next chunk.
 */
export function frameParser() {
  let buf = Buffer.alloc(0);
  return function feed(chunk) {
    buf = Buffer.concat([buf, chunk]);
    const frames = [];
    for (;;) {
      const eol = buf.indexOf(CRLF);
      if (eol < 0) break;
      const line = buf.subarray(0, eol).toString('latin1');
      const parts = line.split(' ').filter(Boolean);
      const op = (parts[0] || '').toUpperCase();
      let len = eol + 2;
      if (op === 'MSG' || op === 'PUB' || op === 'HMSG' || op === 'HPUB') {
        const total = Number(parts[parts.length - 1]);
        if (buf.length < eol + 2 + total + 2) break;
        len = eol + 2 + total + 2;
      }
      frames.push({ op, line, parts, raw: buf.subarray(0, len) });
      buf = buf.subarray(len);
    }
    return frames;
  };
}

/** The payload of a MSG/HMSG/PUB/HPUB frame (headers excluded), as a Buffer. */
export function framePayload(f) {
  const eol = f.raw.indexOf(CRLF);
  const body = f.raw.subarray(eol + 2, f.raw.length - 2);
  if (f.op === 'HMSG' || f.op === 'HPUB') return body.subarray(Number(f.parts[f.parts.length - 2]));
  return body;
}

/**
 * A TCP proxy in front of one NATS server that can drop frames: `dropFromServer(frame)` and
 * `dropFromClient(frame)` return true to drop (each frame is offered once). INFO frames lose
 * their connect_urls, so a client does not learn the cluster and bypass the proxy.
 * Returns {port, url, dropped: {server, client}, stop()}.
 */
export async function startNatsProxy(targetPort, { dropFromServer = () => false,
  dropFromClient = () => false } = {}) {
  const conns = new Set();
  const proxy = { dropped: { server: 0, client: 0 } };
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, '127.0.0.1');
    conns.add(client);
    conns.add(upstream);
    const fromServer = frameParser();
    const fromClient = frameParser();
    upstream.on('data', (d) => {
      for (const f of fromServer(d)) {
        if (f.op === 'INFO') {
          const info = JSON.parse(f.line.slice(5));
          delete info.connect_urls;
          client.write(`INFO ${JSON.stringify(info)}\r\n`);
        } else if (dropFromServer(f)) {
          proxy.dropped.server += 1;
        } else {
          client.write(f.raw);
        }
      }
    });
    client.on('data', (d) => {
      for (const f of fromClient(d)) {
        if (dropFromClient(f)) proxy.dropped.client += 1;
        else upstream.write(f.raw);
      }
    });
    const end = () => { client.destroy(); upstream.destroy(); conns.delete(client); conns.delete(upstream); };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise((res) => server.listen(0, '127.0.0.1', res));
  proxy.port = server.address().port;
  proxy.url = `nats://127.0.0.1:${proxy.port}`;
  proxy.stop = async () => {
    for (const c of conns) c.destroy();
    await new Promise((res) => server.close(res));
  };
  return proxy;
}

/**
 * Publishes one message (headers: an object) to `subject` on the server at `port`, and waits
 * for the server's PONG after it, so the message has been processed. No reply subject: a
 * stream capturing the subject stores it without answering.
 */
export async function natsPublish(port, subject, headers, body) {
  const sock = net.connect(port, '127.0.0.1');
  const feed = frameParser();
  const frames = [];
  let wake = null;
  sock.on('data', (d) => { frames.push(...feed(d)); if (wake) wake(); });
  const next = async (op) => {
    for (;;) {
      const i = frames.findIndex((f) => f.op === op || f.op === '-ERR');
      if (i >= 0) {
        const [f] = frames.splice(i, 1);
        if (f.op === '-ERR') throw new Error(`NATS: ${f.line}`);
        return f;
      }
      await new Promise((res) => { wake = res; });
    }
  };
  await next('INFO');
  const hdr = Buffer.from(`NATS/1.0\r\n${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`, 'latin1');
  const payload = Buffer.from(body);
  sock.write(`CONNECT {"verbose":false,"pedantic":false,"headers":true,"lang":"node-test"}\r\n`);
  sock.write(`HPUB ${subject} ${hdr.length} ${hdr.length + payload.length}\r\n`);
  sock.write(Buffer.concat([hdr, payload, CRLF]));
  sock.write('PING\r\n');
  await next('PONG');
  sock.destroy();
}

/** The state of stream `name` ({messages, bytes, ...}) from the first running node that holds
 * a replica of it, or null. */
export async function streamState(cluster, name) {
  for (let i = 0; i < cluster.nodes.length; i++) {
    if (!cluster.nodes[i].running) continue;
    const j = await cluster.jsz(i, '?streams=true&accounts=true');
    for (const a of j?.account_details || []) {
      for (const s of a.stream_detail || []) if (s.name === name) return s.state;
    }
  }
  return null;
}
