'use strict';
// A pure-JS hot loop calling a small function (optimized, and inlined
// into it), and a loop over a native-heavy API. Runs until killed.
const crypto = require('crypto');

function mix(x) {
  return (x * 31 + 7) % 1000003;
}

function hotLoop() {
  let t = 0;
  for (let k = 0; k < 200000; k++) t = mix(t + k);
  return t;
}

function hashLoop() {
  return crypto.pbkdf2Sync('secret', 'salt', 3000, 32, 'sha256')[0];
}

for (;;) {
  hotLoop();
  hashLoop();
}
