// System-test workload, Node.js: burns CPU in sysNodeHot for BUSY_MS out of
// every PERIOD_MS, for at most LIFETIME_S seconds (see sys_work.c). Timers
// keep the event loop idle in between, as a server's would be.
//
// Usage: node sys_work.js BUSY_MS PERIOD_MS LIFETIME_S
'use strict';
const [busy, period, life] = process.argv.slice(2, 5).map(Number);
let sink = 1;

function sysNodeHot(ms) {
  const end = Date.now() + ms;
  let x = sink;
  while (Date.now() < end) {
    for (let i = 0; i < 20000; i++) x = (x * 1103515245 + 12345) % 4294967296;
  }
  sink = x;
}

const deadline = Date.now() + life * 1000;
function tick() {
  const t0 = Date.now();
  sysNodeHot(busy);
  if (Date.now() >= deadline) process.exit(0);
  setTimeout(tick, Math.max(0, period - (Date.now() - t0)));
}
process.stdout.write(`ready ${process.pid}\n`);
tick();
