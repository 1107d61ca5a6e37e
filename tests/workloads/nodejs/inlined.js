'use strict';
// A small function called from a hot loop: V8's optimizing compilers
// (TurboFan, Maglev) inline it into the loop's function, so the machine
// stack holds one frame for the two JavaScript functions. Runs until killed.
function leafWork(x) {
  let s = 0;
  for (let i = 0; i < 200; i++) s += Math.sqrt(x + i);
  return s;
}

function outerLoop() {
  let t = 0;
  for (let k = 0; k < 100000; k++) t += leafWork(k);
  return t;
}

for (;;) outerLoop();
