'use strict';
// About one second of CPU in a named function, then exit: a process that
// starts after the profiler and ends before a session does. CPU time, not
// wall time, so a loaded host still gives it a second's worth of samples.
function burnOneSecond() {
  const cpu = () => {
    const u = process.cpuUsage();
    return u.user + u.system;
  };
  const end = cpu() + 1e6;
  let x = 0;
  while (cpu() < end) {
    for (let i = 0; i < 5000; i++) x += Math.sqrt(i + x);
  }
  return x;
}

burnOneSecond();
