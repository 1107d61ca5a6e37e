'use strict';
// Loopback HTTP server for the nodejs plugin tests and benchmark: every
// request computes a small Fibonacci number in named functions, so the
// profile has JS frames and the request rate reflects CPU time.
// Prints the listening port on stdout.
const http = require('http');

function fib(n) {
  return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

function handleRequest(req, res) {
  const body = String(fib(Number(process.env.FIB_N || 20)));
  res.writeHead(200, {'Content-Type': 'text/plain', 'Content-Length': body.length});
  res.end(body);
}

const server = http.createServer(handleRequest);
server.keepAliveTimeout = 60000;
server.listen(Number(process.env.PORT || 0), '127.0.0.1', () => {
  process.stdout.write(server.address().port + '\n');
});
