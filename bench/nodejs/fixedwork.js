'use strict';
// Fixed CPU work for bench.py --fixed-work: waits for a line on stdin (the
// profiler is attached by then), runs the same computation every time and
// prints the CPU time it took (user + system, microseconds). CPU time per
// fixed work is what a profiler adds to a target, and depends much less on
// how much of a shared host the process got than throughput does.
function work(n) {
  let x = 0;
  for (let i = 0; i < n; i++) x += Math.sqrt(i % 1000 + x % 7);
  return x;
}
function run() {
  const a = process.cpuUsage();
  for (let k = 0; k < 40; k++) work(2e6);
  const d = process.cpuUsage(a);
  process.stdout.write(String(d.user + d.system) + '\n');
  process.exit(0);
}
process.stdin.once('data', run);
