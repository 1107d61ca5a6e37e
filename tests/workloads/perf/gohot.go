// Test workload for the perf plugin: a Go program with one hot function.
// Usage: gohot SECONDS
package main

import (
	"os"
	"strconv"
	"time"
)

var sink uint64

//go:noinline
func hotLoop() {
	x := sink | 1
	for i := 0; i < 1000000; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	sink = x
}

func main() {
	secs := 5.0
	if len(os.Args) > 1 {
		if v, err := strconv.ParseFloat(os.Args[1], 64); err == nil {
			secs = v
		}
	}
	end := time.Now().Add(time.Duration(secs * float64(time.Second)))
	for time.Now().Before(end) {
		hotLoop()
	}
}
