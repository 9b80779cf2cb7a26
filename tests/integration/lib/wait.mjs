// Polling for a condition that another process makes true (a sink receiving, a counter moving).

/**
 * Wait until `cond()` (sync or async) returns a truthy value and return it; after `ms`
 * milliseconds throw an error that says `what()` (the state it was waiting on).
 */
export async function waitFor(cond, ms, what, intervalMs = 25) {
  const t0 = Date.now();
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() - t0 > ms) throw new Error(`timed out: ${what()}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
