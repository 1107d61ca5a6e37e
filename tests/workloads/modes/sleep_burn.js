// The event loop alternates: burner() spins 20 ms, then the main thread
// waits 20 ms in the event loop (a timer). Profile types: wall holds the
// burner and V8's (idle) time, cpu the burner only.
// Usage: node sleep_burn.js SECONDS
const end = Date.now() + 1000 * Number(process.argv[2] || 30);

function burner() {
  const until = Date.now() + 20;
  let x = 0;
  while (Date.now() < until) x++;
  return x;
}

function turn() {
  burner();
  if (Date.now() < end) setTimeout(turn, 20);
}

console.log("ready");
turn();
