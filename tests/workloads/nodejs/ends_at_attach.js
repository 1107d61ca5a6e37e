'use strict';
// A Node program that finishes the moment a profiler has attached to it:
// the agent's first request on a new session evaluates an expression that
// asks process.getBuiltinModule('fs') for the target's pid namespace, and
// that call ends the program (the work timer is cleared, so the event loop
// empties). The program is then over before the agent has asked Node to
// announce the exit (NodeRuntime.notifyWhenWaitingForDisconnect), so no
// announcement ever comes, while Node holds the process at exit until the
// session goes ("Waiting for the debugger to disconnect..."). An agent
// that waits for the announcement keeps this process alive for good.
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
