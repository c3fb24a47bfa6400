// Channel ping-pong between two goroutines over unbuffered channels (the reference
// figure): prints ns per round trip (2 sends + 2 receives). Run with GOMAXPROCS=2.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

func main() {
	n := 2000000
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	for round := 0; round < 5; round++ {
		ping := make(chan int)
		pong := make(chan int)
		go func() {
			for v := range ping {
				pong <- v
			}
		}()
		start := time.Now()
		for i := 0; i < n; i++ {
			ping <- i
			<-pong
		}
		el := time.Since(start)
		close(ping)
		fmt.Printf("go unbuffered ping-pong: %.1f ns/round trip\n", float64(el.Nanoseconds())/float64(n))
	}
}
