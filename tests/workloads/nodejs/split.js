'use strict';
// CPU workload for the nodejs plugin tests: two call paths burn CPU in a
// 3:1 ratio. heavyPath goes through a class method, lightPath is an async
// function resumed from a microtask. Runs until killed.

// Work is measured in CPU time (process.cpuUsage), so the two paths burn
// CPU 3:1 whatever the JIT does with each call site and however loaded the
// machine is. Its size varies from one round to the next, as requests do: a
// round of fixed length (4 ms) against a sampler's fixed period (10 ms at
// 100 Hz) would alias, every sample falling on one of the same two points
// of the round for seconds at a time, and the split measured would depend
// on where those points happen to sit rather than on the time spent.
function spin(ms) {
  const cpu = () => {
    const u = process.cpuUsage();
    return u.user + u.system;
  };
  const end = cpu() + ms * 1000;
  let x = 0;
  while (cpu() < end) {
    for (let i = 0; i < 2000; i++) x += Math.sqrt(i + x);
  }
  return x;
}

class Calculator {
  crunch(ms) {
    return spin(ms);
  }
}

function heavyPath(calc, unit) {
  return calc.crunch(3 * unit);
}

async function lightPath(unit) {
  await null;
  return spin(unit);
}

// One round of work, as a request handler does it. V8's optimizing
// compiler may inline heavyPath (with crunch and spin) into round, and V8's
// profiler does not always give inlined functions frames of their own: such
// samples show as round, whose only synchronous callee is heavyPath (the
// tests count them as heavy). lightPath resumes from a microtask, under no
// caller.
async function round(calc) {
  const unit = 0.5 + Math.random(); // ms of CPU
  heavyPath(calc, unit);
  await lightPath(unit);
}

async function main() {
  const calc = new Calculator();
  let last = Date.now();
  for (;;) {
    await round(calc);
    if (Date.now() - last > 50) {
      // let timers and I/O (and the inspector's own handles) run
      await new Promise((r) => setImmediate(r));
      last = Date.now();
    }
  }
}

main();
