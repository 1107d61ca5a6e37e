'use strict';
// CPU workload for the nodejs plugin tests: two call paths burn CPU in a
// 3:1 ratio. heavyPath goes through a class method, lightPath is an async
// function resumed from a microtask. Runs until killed.

// Work is measured in CPU time (process.cpuUsage), so the two paths burn
// CPU 3:1 whatever the JIT does with each call site and however loaded the
// machine is.
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

function heavyPath(calc) {
  return calc.crunch(3);
}

async function lightPath() {
  await null;
  return spin(1);
}

async function main() {
  const calc = new Calculator();
  let last = Date.now();
  for (;;) {
    heavyPath(calc);
    await lightPath();
    if (Date.now() - last > 50) {
      // let timers and I/O (and the inspector's own handles) run
      await new Promise((r) => setImmediate(r));
      last = Date.now();
    }
  }
}

main();
