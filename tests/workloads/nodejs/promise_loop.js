'use strict';
// A CPU-bound program whose main loop awaits promises that are already
// resolved: every await resumes from the microtask queue, so the main
// thread never returns to the event loop (no timer, no I/O callback, no
// setImmediate ever runs). A profiler that needs the event loop gets
// nothing from it. Runs until killed.
function promiseWork() {
  let x = 0;
  for (let i = 0; i < 20000; i++) x += Math.sqrt(i + x);
  return x;
}

async function promiseLoop() {
  for (;;) {
    await Promise.resolve();
    promiseWork();
  }
}

promiseLoop();
