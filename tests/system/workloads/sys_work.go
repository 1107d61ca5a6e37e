// System-test workload, Go: burns CPU in main.sysGoHot for BUSY_MS out of
// every PERIOD_MS, for at most LIFETIME_S seconds (see sys_work.c).
//
// Usage: sys_work_go BUSY_MS PERIOD_MS LIFETIME_S
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

var sink uint64

//go:noinline
func sysGoHot(d time.Duration) {
	end := time.Now().Add(d)
	x := sink
	for time.Now().Before(end) {
		for i := 0; i < 20000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	sink = x
}

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: sys_work_go BUSY_MS PERIOD_MS LIFETIME_S")
		os.Exit(2)
	}
	busy, _ := strconv.Atoi(os.Args[1])
	period, _ := strconv.Atoi(os.Args[2])
	life, _ := strconv.Atoi(os.Args[3])
	fmt.Printf("ready %d\n", os.Getpid())
	end := time.Now().Add(time.Duration(life) * time.Second)
	for time.Now().Before(end) {
		t0 := time.Now()
		sysGoHot(time.Duration(busy) * time.Millisecond)
		if left := time.Duration(period)*time.Millisecond - time.Since(t0); left > 0 {
			time.Sleep(left)
		}
	}
}
