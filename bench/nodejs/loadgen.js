'use strict';
// Loopback HTTP load generator for bench/nodejs: CONCURRENCY keep-alive
// loops issue GET / against 127.0.0.1:PORT for DURATION seconds and the
// number of completed requests (and errors) is printed as JSON.
const http = require('http');
const [port, duration, concurrency] = process.argv.slice(2).map(Number);
const agent = new http.Agent({keepAlive: true, maxSockets: concurrency});
let ok = 0, errors = 0, running = true;
function loop() {
  if (!running) return;
  const req = http.get({host: '127.0.0.1', port, path: '/', agent}, (res) => {
    res.resume();
    res.on('end', () => {
      if (res.statusCode === 200) ok++; else errors++;
      loop();
    });
  });
  req.on('error', () => {
    errors++;
    setTimeout(loop, 10);
  });
}
for (let i = 0; i < concurrency; i++) loop();
setTimeout(() => {
  running = false;
  process.stdout.write(JSON.stringify({ok, errors, seconds: duration}) + '\n');
  process.exit(0);
}, duration * 1000);
