// bench/nats_cluster.mjs [NODES]: starts a JetStream cluster of nats-server on loopback for a
// benchmark (tests/integration/lib/nats.mjs), prints `urls=URL,URL,... pids=PID,PID,...` once
// every node agrees on a meta leader, and stops it all on SIGTERM or SIGINT.
import { startNatsCluster } from '../tests/integration/lib/nats.mjs';

const cluster = await startNatsCluster({ nodes: Number(process.argv[2] || 3) });
console.log(`urls=${cluster.urls.join(',')} pids=${cluster.nodes.map((n) => n.proc.pid).join(',')}`);
const stop = async () => { await cluster.stop(); process.exit(0); };
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
setInterval(() => {}, 1 << 30);
