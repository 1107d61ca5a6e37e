// The main thread burns 100 ms in burner() and blocks 100 ms in sleeper()
// (Atomics.wait: a synchronous wait, its JS frames on the stack), in turn.
// Profile types: wall shows both about evenly, cpu only the burner.
// Usage: node sleep_burn_sync.js SECONDS [idle] (idle: no burner, for the
// cost of sampling a process that only waits)
const end = Date.now() + 1000 * Number(process.argv[2] || 30);
const idle = process.argv[3] === "idle";
const cell = new Int32Array(new SharedArrayBuffer(4));

function burner() {
  const until = Date.now() + 100;
  let x = 0;
  while (Date.now() < until) x++;
  return x;
}

function sleeper() {
  Atomics.wait(cell, 0, 0, 100);
}

console.log("ready");
while (Date.now() < end) {
  if (!idle) burner();
  sleeper();
}
