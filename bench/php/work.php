<?php
// Benchmark worker: a fixed amount of CPU work in a few known functions.
// With EXCIMER_HZ set, the in-process sampler excimer profiles it (wall
// clock, like phpspy and the php plugin) and the collapsed stacks are
// formatted at the end, as a user of excimer would; prints the sample count.
function leaf(int $n): int { $s = 0; for ($i = 0; $i < $n; $i++) { $s += ($i * $i) % 7; } return $s; }
function mid(int $n): int { return leaf($n) + leaf($n >> 1); }
class Job {
    public function run(int $k): int { $t = 0; for ($j = 0; $j < $k; $j++) { $t += mid(2000); } return $t; }
}
$hz = (int)(getenv('EXCIMER_HZ') ?: 0);
$p = null;
if ($hz > 0) {
    $p = new ExcimerProfiler();
    $p->setPeriod(1.0 / $hz);
    $p->setEventType(EXCIMER_REAL);
    $p->start();
}
(new Job())->run((int)($argv[1] ?? 1000));
if ($p) {
    $p->stop();
    $log = $p->flush();
    $text = $log->formatCollapsed();
    $n = 0;
    foreach ($log as $entry) { $n += $entry->getEventCount(); }
    echo "samples $n bytes " . strlen($text) . "\n";
} else {
    echo "samples 0\n";
}
