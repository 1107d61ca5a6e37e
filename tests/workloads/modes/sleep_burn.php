<?php
// PHP is one thread per process: the same process burns in burner() and
// sleeps in sleeper(), 100 ms each in turn (profile types: wall shows both
// about evenly, cpu only the burner). Usage: php sleep_burn.php SECONDS
function burner() {
    $end = microtime(true) + 0.1;
    $x = 0;
    while (microtime(true) < $end) {
        $x += 1;
    }
    return $x;
}

function sleeper() {
    usleep(100000);
}

$end = microtime(true) + (float)($argv[1] ?? 30);
echo "ready\n";
fflush(STDOUT);
while (microtime(true) < $end) {
    burner();
    sleeper();
}
