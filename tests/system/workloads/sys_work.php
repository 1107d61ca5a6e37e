<?php
// System-test workload, PHP: burns CPU in sys_php_hot for BUSY_MS out of
// every PERIOD_MS, for at most LIFETIME_S seconds (see sys_work.c).
//
// Usage: php sys_work.php BUSY_MS PERIOD_MS LIFETIME_S
function sys_php_hot($ms) {
    $end = microtime(true) + $ms / 1000.0;
    $x = 1;
    while (microtime(true) < $end) {
        for ($i = 0; $i < 2000; $i++) $x = ($x * 1103515245 + 12345) & 0xFFFFFFFF;
    }
    return $x;
}

$busy = (float)$argv[1];
$period = (float)$argv[2];
$end = microtime(true) + (float)$argv[3];
echo "ready " . getmypid() . "\n";
flush();
while (microtime(true) < $end) {
    $t0 = microtime(true);
    sys_php_hot($busy);
    $left = $period / 1000.0 - (microtime(true) - $t0);
    if ($left > 0) usleep((int)($left * 1e6));
}
