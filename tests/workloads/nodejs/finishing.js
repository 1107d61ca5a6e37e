'use strict';
// A Node program that finishes on its own while being profiled: it burns
// CPU in finishingWork() (in slices, so the event loop turns and the agent
// can move the inspector it opened off port 9229) until the inspector
// listens on its final port, then for 5 s more, and returns: the process
// then exits. Node holds a process whose inspector has a session attached
// at exit, so this one exits on time only if the profiler lets it go.
const inspector = require('inspector');

function finishingWork(ms) {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) x += Math.sqrt(x + 1);
  return x;
}

const giveUp = Date.now() + 60000;

function burn(end) {
  if (Date.now() >= end) {
    process.stdout.write('done\n');
    return;
  }
  finishingWork(50);
  setImmediate(() => burn(end));
}

function waitForAgent() {
  const url = inspector.url();
  if ((url && !url.includes(':9229/')) || Date.now() > giveUp) return burn(Date.now() + 5000);
  finishingWork(20);
  setImmediate(waitForAgent);
}

waitForAgent();
