'use strict';
// A Node program that finishes the moment a profiler attaches to it: the
// agent's request over the inspector asks process.getBuiltinModule('fs')
// for the target's pid namespace, and that call ends the program (the work
// timer is cleared, so the event loop empties). The process then exits
// while the agent's inspector session is being closed and its helper
// thread is still starting: anything of the agent's left attached would
// hold it ("Waiting for the debugger to disconnect...") or crash it.
function attachedWork(ms) {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) x += Math.sqrt(x + 1);
  return x;
}

const work = setInterval(() => attachedWork(20), 25);
const lookup = process.getBuiltinModule;
process.getBuiltinModule = function (name) {
  if (name === 'fs') {
    clearInterval(work);
    process.stdout.write('ended at attach\n');
  }
  return lookup.apply(this, arguments);
};
// nobody attached within 2 minutes: give up with status 3
setTimeout(() => process.exit(3), 120000).unref();
