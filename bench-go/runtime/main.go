// Side-by-side Go numbers for purloin's runtime benchmarks (BENCHMARKS.md).
// Run: GOMAXPROCS=2 go run bench-go/runtime/main.go
// Same shapes as runtime/benches/runtime.rs; each line prints the best of 5 runs.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"
)

// spawn + join of n no-op goroutines from a goroutine (join = one channel per goroutine,
// like a join handle).
func spawnJoin(n int) time.Duration {
	done := make(chan time.Duration)
	go func() {
		start := time.Now()
		hs := make([]chan int, n)
		for i := 0; i < n; i++ {
			c := make(chan int, 1)
			hs[i] = c
			go func(i int) { c <- i }(i)
		}
		for _, c := range hs {
			<-c
		}
		done <- time.Since(start)
	}()
	return <-done
}

// fib(n), forking fib(n-1) as a goroutine and joining it through a channel.
func fib(n int) int {
	if n < 2 {
		return n
	}
	c := make(chan int, 1)
	go func() { c <- fib(n - 1) }()
	b := fib(n - 2)
	return <-c + b
}

func forks(n int) int {
	if n < 2 {
		return 0
	}
	return 1 + forks(n-1) + forks(n-2)
}

// skynet: 10-ary tree of goroutines, leaves return their number, parents sum.
func skynet(c chan int, num int, size int, div int) {
	if size == 1 {
		c <- num
		return
	}
	rc := make(chan int, div)
	var sum int
	for i := 0; i < div; i++ {
		subNum := num + i*(size/div)
		go skynet(rc, subNum, size/div, div)
	}
	for i := 0; i < div; i++ {
		sum += <-rc
	}
	c <- sum
}

func yieldLoop(n int) time.Duration {
	done := make(chan time.Duration)
	go func() {
		start := time.Now()
		for i := 0; i < n; i++ {
			runtime.Gosched()
		}
		done <- time.Since(start)
	}()
	return <-done
}

func rssKiB() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	var v int
	for _, line := range splitLines(string(b)) {
		if len(line) > 6 && line[:6] == "VmRSS:" {
			fmt.Sscanf(line[6:], "%d", &v)
		}
	}
	return v
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

func best(f func() time.Duration) time.Duration {
	b := time.Hour
	for i := 0; i < 5; i++ {
		if d := f(); d < b {
			b = d
		}
	}
	return b
}

func main() {
	fmt.Printf("go %s GOMAXPROCS=%d\n", runtime.Version(), runtime.GOMAXPROCS(0))
	n := 100000
	d := best(func() time.Duration { return spawnJoin(n) })
	fmt.Printf("spawn_join_100k: %.1f ns/op\n", float64(d.Nanoseconds())/float64(n))

	fn := 25
	d = best(func() time.Duration {
		start := time.Now()
		done := make(chan int)
		go func() { done <- fib(fn) }()
		<-done
		return time.Since(start)
	})
	fmt.Printf("fib_25: %.1f ns/fork (%d forks, %.2f ms)\n", float64(d.Nanoseconds())/float64(forks(fn)), forks(fn), float64(d.Nanoseconds())/1e6)

	for _, size := range []int{1000000} {
		d = best(func() time.Duration {
			start := time.Now()
			c := make(chan int)
			go skynet(c, 0, size, 10)
			<-c
			return time.Since(start)
		})
		fmt.Printf("skynet_%d: %.1f ms\n", size, float64(d.Nanoseconds())/1e6)
	}

	y := 1000000
	d = best(func() time.Duration { return yieldLoop(y) })
	fmt.Printf("yield: %.1f ns/op\n", float64(d.Nanoseconds())/float64(y))

	parked := 100000
	if len(os.Args) > 1 {
		parked, _ = strconv.Atoi(os.Args[1])
	}
	runtime.GC()
	before := rssKiB()
	var wg sync.WaitGroup
	release := make(chan struct{})
	wg.Add(parked)
	for i := 0; i < parked; i++ {
		go func() { wg.Done(); <-release }()
	}
	wg.Wait()
	after := rssKiB()
	fmt.Printf("parked_%d: %.2f KiB RSS per parked goroutine\n", parked, float64(after-before)/float64(parked))
	close(release)
}
