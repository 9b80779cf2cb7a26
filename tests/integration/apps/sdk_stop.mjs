// sdk_stop.mjs: stopping @pyroscope/nodejs without its race. Its ContinuousProfiler's timer
// callback only queues the profiling round with setImmediate; a stop() that runs between the two
// (from a setTimeout of ours due in the same timers phase) stops the profiler, then the queued
// round calls profile() on it and throws 'Wall profiler is not started', killing the app (seen
// in 1 of 2 ASan runs of load_balancing.test.mjs). Two turns of the check phase: the first may
// run before a round queued in the same timers phase, the second runs after it, and stop()
// then awaits the round's upload.
import { setImmediate as checkPhase } from 'node:timers/promises';

export async function stopProfiling(stop) {
  await checkPhase();
  await checkPhase();
  await stop();
}
