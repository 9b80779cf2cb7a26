// The NATS harness the bus tests stand on (lib/nats.mjs): three real nats-server nodes on
// loopback routes elect a JetStream meta leader; killing the leader makes the other two elect
// another; the killed node restarts on its ports and store and rejoins; stop() ends every
// process and removes the temp dir.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { startNatsCluster, natsServerVersion } from './lib/nats.mjs';

describe('nats cluster harness', () => {
  let c;
  after(async () => { await c?.stop(); });

  it('starts 3 routed JetStream nodes that agree on a meta leader', async () => {
    assert.ok(natsServerVersion(), 'nats-server is not installed: run scripts/setup');
    c = await startNatsCluster();
    const leader = await c.leader();
    const li = c.indexOf(leader);
    assert.ok(li >= 0, `leader ${leader} is one of ours`);
    const meta = (await c.jsz(li)).meta_cluster;
    assert.equal(meta.cluster_size, 3);
    assert.deepEqual(meta.replicas.map((r) => r.name).sort(),
      c.nodes.filter((n) => n.name !== leader).map((n) => n.name).sort());
    for (const n of c.nodes) {
      const routez = await (await fetch(`http://127.0.0.1:${n.httpPort}/routez`)).json();
      assert.equal(routez.num_routes, 2, `${n.name} is routed to both others`);
    }
  });

  it('a killed leader is replaced, and the restarted node rejoins', async () => {
    const old = await c.leader();
    const i = c.indexOf(old);
    await c.kill(i);
    assert.equal(c.nodes[i].running, false);
    const next = await c.ready();
    assert.notEqual(next, old);
    await c.restart(i);
    const meta = (await c.jsz(c.indexOf(await c.leader()))).meta_cluster;
    assert.equal(meta.replicas.length, 2);
    assert.ok(meta.replicas.some((r) => r.name === old), `${old} is a peer again`);
  });

  it('stop ends every node and removes the temp dir', async () => {
    await c.stop();
    assert.ok(c.nodes.every((n) => !n.running));
    assert.equal(existsSync(c.dir), false);
    c = null;
  });
});
