
// CPU workload for the nodejs plugin tests: two call paths burn CPU in a
// 3:1 ratio. heavyPath goes through a class method, lightPath is an async
// function resumed from a microtask. Runs until killed.

// Work is counted in iterations, not time, so the 3:1 split holds on a
// loaded machine too.
function spin(units) {
  let x = 0;
  for (let i = 0; i < units * 50000; i++) x += Math.sqrt(i + x);
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
