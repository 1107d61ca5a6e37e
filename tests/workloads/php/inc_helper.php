<?php
// Included by busy.php: a function defined in another file shows that file.
function included_work(float $seconds): int {
    $end = microtime(true) + $seconds;
    $s = 0;
    while (microtime(true) < $end) { $s++; }
    return $s;
}
