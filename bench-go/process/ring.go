// Token ring of 10,000 goroutines linked by unbuffered channels, passing a token 10^6 hops:
// the Go counterpart of runtime/benches/process.rs (`token_ring_10k`). Prints hops/s for a
// few laps around an already-built ring (same shape as the Rust bench: each lap injects a
// token with 10^6 hops to go and waits for the member that sees 0).
//
//	go run ring.go            # GOMAXPROCS = number of CPUs (2 on the reference machine)
//	GOMAXPROCS=1 go run ring.go
package main

import (
	"fmt"
	"runtime"
	"time"
)

const members = 10_000
const hops = 1_000_000

func main() {
	chans := make([]chan int, members)
	for i := range chans {
		chans[i] = make(chan int)
	}
	done := make(chan struct{})
	for i := 0; i < members; i++ {
		in, out := chans[i], chans[(i+1)%members]
		go func() {
			for v := range in {
				if v == 0 {
					done <- struct{}{}
					continue
				}
				out <- v - 1
			}
		}()
	}
	fmt.Printf("GOMAXPROCS=%d, %d goroutines, %d hops per lap\n", runtime.GOMAXPROCS(0), members, hops)
	best := time.Duration(1 << 62)
	var total time.Duration
	const laps = 10
	for lap := 0; lap < laps; lap++ {
		start := time.Now()
		chans[0] <- hops - 1
		<-done
		d := time.Since(start)
		total += d
		if d < best {
			best = d
		}
	}
	mean := total / laps
	fmt.Printf("mean %v per lap (%.2f Mhops/s), best %v (%.2f Mhops/s)\n",
		mean, hops/mean.Seconds()/1e6, best, hops/best.Seconds()/1e6)
}
