'use strict';
// Returns to its event loop only every 1.5 s: a batch job that processes
// chunks synchronously and schedules the next chunk with setImmediate. Runs
// until killed.
function chunk(ms) {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) {
    for (let i = 0; i < 2000; i++) x += Math.sqrt(i + x);
  }
  return x;
}

function next() {
  chunk(1500);
  setImmediate(next);
}

next();
