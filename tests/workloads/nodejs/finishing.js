'use strict';
// A Node program that finishes on its own while being profiled: it burns
// CPU in finishingWork() for 8 s, in slices from setImmediate, then
// returns and the process exits. It exits on time only if nothing the
// profiler left in it holds it, and its last samples reach the agent only
// if they are handed over at exit.
function finishingWork(ms) {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) x += Math.sqrt(x + 1);
  return x;
}

function burn(end) {
  if (Date.now() >= end) {
    process.stdout.write('done\n');
    return;
  }
  finishingWork(50);
  setImmediate(() => burn(end));
}

burn(Date.now() + 8000);
