'use strict';
// A Node program that finishes on its own while being profiled: it burns
// CPU in finishingWork() for 8 s, in slices so the event loop turns (the
// agent moves the inspector it opened off port 9229 from the event loop),
// then returns and the process exits. Node holds a process whose inspector
// has a session attached at exit, so this one exits on time only if the
// profiler lets it go.
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
