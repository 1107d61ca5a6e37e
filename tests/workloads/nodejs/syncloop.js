'use strict';
// The main thread never returns to the event loop: a synchronous loop that
// keeps creating resolved promises (their reactions can never run) and
// burns CPU in between. Runs until killed.
function churn(n) {
  let x = 0;
  for (let i = 0; i < n; i++) x += Math.sqrt(i + x);
  return x;
}

function neverYields() {
  let total = 0;
  for (;;) {
    Promise.resolve(total).then((v) => v + 1);
    total += churn(20000);
  }
}

neverYields();
