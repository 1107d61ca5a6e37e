<?php
// Known stacks for the php plugin's tests: a function (heavy_a) doing three
// times the work of another (light_b), a class method, a closure and a
// function from an included file. Runs for $argv[1] seconds (default 60).
require __DIR__ . '/inc_helper.php';

function spin(int $n): int {
    $x = 0;
    for ($i = 0; $i < $n; $i++) {
        $x += $i % 3;
    }
    return $x;
}
function heavy_a() { return spin(300000); }
function light_b() { return spin(100000); }

class Worker {
    public function method_c() { return spin(40000); }
}

$closure = function () { return spin(40000); };

$deadline = microtime(true) + (float)($argv[1] ?? 60);
$w = new Worker();
while (microtime(true) < $deadline) {
    heavy_a();
    light_b();
    $w->method_c();
    $closure();
    included_work(2000);
}
