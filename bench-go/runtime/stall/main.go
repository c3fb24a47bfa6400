// The Go twin of `cargo bench -p purloin-sched --bench profile -- stall`: a ping-pong pair's
// round trips (unbuffered channels) while 4 goroutines block in syscall.Read on pipes with
// GOMAXPROCS=2, next to the same pair with nothing blocked. Prints p50, p99 and the worst
// round trip of each.
// Run: GOMAXPROCS=2 go run ./bench-go/runtime/stall
package main

import (
	"fmt"
	"sort"
	"sync/atomic"
	"syscall"
	"time"
)

const blockers = 4
const roundTrips = 20000

func pingPong() []time.Duration {
	ping, pong := make(chan int), make(chan int)
	go func() {
		for v := range ping {
			pong <- v + 1
		}
	}()
	times := make([]time.Duration, 0, roundTrips)
	done := make(chan struct{})
	go func() {
		v := 0
		for i := 0; i < roundTrips; i++ {
			t := time.Now()
			ping <- v
			v = <-pong
			times = append(times, time.Since(t))
		}
		close(ping)
		close(done)
	}()
	<-done
	return times
}

func report(what string, times []time.Duration) {
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	q := func(f float64) time.Duration { return times[int(float64(len(times)-1)*f)] }
	fmt.Printf("%s: %d round trips, p50 %v, p99 %v, max %v\n", what, len(times), q(0.5), q(0.99), times[len(times)-1])
}

func main() {
	report("nothing blocked", pingPong())

	var started, returned atomic.Int32
	fds := make([][2]int, blockers)
	finished := make(chan struct{}, blockers)
	for i := range fds {
		if err := syscall.Pipe(fds[i][:]); err != nil {
			panic(err)
		}
		fd := fds[i][0]
		go func() {
			started.Add(1)
			b := make([]byte, 1)
			n, err := syscall.Read(fd, b)
			returned.Store(1)
			if n != 1 || err != nil {
				panic(fmt.Sprint("read: ", n, err))
			}
			finished <- struct{}{}
		}()
	}
	for started.Load() < blockers {
		time.Sleep(time.Millisecond)
	}
	// Let the reads enter the kernel and sysmon retake their P's.
	time.Sleep(20 * time.Millisecond)
	stalled := pingPong()
	during := returned.Load() == 0
	for i := range fds {
		syscall.Write(fds[i][1], []byte("x"))
	}
	for i := 0; i < blockers; i++ {
		<-finished
	}
	report(fmt.Sprintf("%d goroutines in syscall.Read on GOMAXPROCS=2", blockers), stalled)
	fmt.Printf("   all round trips done while the reads blocked: %v\n", during)
}
