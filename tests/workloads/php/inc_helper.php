<?php
// Included by busy.php: a function defined in another file shows that file,
// and md5() is an internal (C) function frame.
function included_work(int $n): int {
    $s = 0;
    for ($i = 0; $i < $n; $i++) { $s += strlen(md5((string)$i)); }
    return $s;
}
