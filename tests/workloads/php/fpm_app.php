<?php
// Served by the php-fpm pool in the tests and the benchmark: each request
// spends about 20 ms in a known handler and answers with the worker's pid.
// Once the file named by PP_PHASE2 exists (the test creates it after killing
// every earlier worker) requests go through phase2_entry instead, so those
// frames can only come from workers born mid-session.
class RequestHandler {
    public function handle(float $seconds): int {
        $end = microtime(true) + $seconds;
        $x = 0;
        while (microtime(true) < $end) { $x++; }
        return $x;
    }
}

function fpm_entry() {
    $h = new RequestHandler();
    return $h->handle(0.020);
}

function phase2_entry() {
    $h = new RequestHandler();
    return $h->handle(0.020);
}

$marker = getenv('PP_PHASE2');
if ($marker && file_exists($marker)) {
    phase2_entry();
} else {
    fpm_entry();
}
echo getmypid();
