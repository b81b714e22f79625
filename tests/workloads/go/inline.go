// Burns CPU for the given seconds in a loop that calls small functions the Go compiler
// inlines with its default flags (less is inlined into work): tests/e2e/test_names.py
// checks they appear as inlined frames, less_[i] under work.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

type pair struct{ a, b uint64 }

func less(p pair) bool {
	return p.a*2654435761%1000003 < p.b*40503%1000003
}

//go:noinline
func work(n uint64) uint64 {
	var c uint64
	for i := uint64(0); i < n; i++ {
		if less(pair{i, i ^ 0x5bd1e995}) {
			c++
		}
	}
	return c
}

func main() {
	secs := 5.0
	if len(os.Args) > 1 {
		if v, err := strconv.ParseFloat(os.Args[1], 64); err == nil {
			secs = v
		}
	}
	end := time.Now().Add(time.Duration(secs * float64(time.Second)))
	var total uint64
	for time.Now().Before(end) {
		total += work(1000000)
	}
	fmt.Println(total)
}
