<?php
// Known stacks for the php plugin's tests: a function (heavy_a) that gets
// three times the CPU of another (light_b), a class method, a closure and a
// function from an included file. Runs for $argv[1] seconds (default 60).
require __DIR__ . '/inc_helper.php';

function spin(float $seconds): int {
    $end = microtime(true) + $seconds;
    $x = 0;
    while (microtime(true) < $end) { $x++; }
    return $x;
}

function heavy_a() { return spin(0.030); }
function light_b() { return spin(0.010); }

class Worker {
    public function method_c() { return spin(0.004); }
}

$closure = function () { return spin(0.004); };

$deadline = microtime(true) + (float)($argv[1] ?? 60);
$w = new Worker();
while (microtime(true) < $deadline) {
    heavy_a();
    light_b();
    $w->method_c();
    $closure();
    included_work(0.004);
}
