// bench/nats_spike.mjs (from the repository root: node bench/nats_spike.mjs [msgs] [bytes]):
// starts a 3-node JetStream cluster (tests/integration/lib/nats.mjs), runs build/bench/nats_spike
// against it and obeys its `CMD kill|restart port=P|name=N` lines, so the spike sees a node die
// while it publishes and while it consumes. Prints the spike's lines and the driver's, timed.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startNatsCluster } from '../tests/integration/lib/nats.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const bin = process.env.NATS_SPIKE_BIN || resolve(here, '../build/bench/nats_spike');
const [msgs = '20000', bytes = '1024'] = process.argv.slice(2);

const t0 = Date.now();
const stamp = () => `${((Date.now() - t0) / 1000).toFixed(2).padStart(6)}s`;
const cluster = await startNatsCluster();
console.log(`${stamp()} driver: cluster up: ${cluster.nodes.map((n) => `${n.name}=${n.port}`)
  .join(' ')}, meta leader ${await cluster.leader()}`);

const spike = spawn(bin, [cluster.urls.join(','), msgs, bytes], { stdio: ['ignore', 'pipe', 'inherit'] });
const pending = [];
createInterface({ input: spike.stdout }).on('line', (line) => {
  console.log(`${stamp()} ${line}`);
  const m = /^CMD (kill|restart) (port|name)=(\S+)/.exec(line);
  if (!m) return;
  const i = cluster.indexOf(m[3]);
  if (i < 0) return console.log(`${stamp()} driver: no node ${m[2]}=${m[3]}`);
  const name = cluster.nodes[i].name;
  pending.push((m[1] === 'kill' ? cluster.kill(i) : cluster.restart(i)).then(
    () => console.log(`${stamp()} driver: ${m[1]} ${name} done`),
    (e) => console.log(`${stamp()} driver: ${m[1]} ${name} failed: ${e.message.split('\n')[0]}`)));
});
const code = await new Promise((res) => spike.on('exit', (c, s) => res(c ?? s)));
await Promise.all(pending);
console.log(`${stamp()} driver: spike exited ${code}`);
await cluster.stop();
process.exit(code === 0 ? 0 : 1);
