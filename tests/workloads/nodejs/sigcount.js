'use strict';
// Preloaded (node -r) by the v8 mode tests: counts the signals a profiled
// process receives, to show that the profiler sends none. SIGUSR1 (which
// opens Node's inspector) and the other catchable signals a profiler could
// use; the counts are written to the file named by SIGCOUNT_FILE at each
// signal, so the test reads them while the process runs.
const fs = require('fs');
const out = process.env.SIGCOUNT_FILE;
const counts = {};
function save() {
  if (out) fs.writeFileSync(out, JSON.stringify(counts));
}
for (const sig of ['SIGUSR1', 'SIGUSR2', 'SIGPROF', 'SIGHUP', 'SIGWINCH', 'SIGCONT', 'SIGALRM']) {
  counts[sig] = 0;
  process.on(sig, () => {
    counts[sig]++;
    save();
  });
}
save();
