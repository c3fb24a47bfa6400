// Go twin of purloin's runtime/benches/profile/idle.rs: what an idle runtime costs.
// Run: cd bench-go/runtime/idle && GOMAXPROCS=2 go run main.go
// 100 goroutines parked on a channel, one in a 6 s sleep, main in a 5 s sleep; prints the
// process's CPU time (user + system, getrusage) over main's 5 s.
package main

import (
	"fmt"
	"syscall"
	"time"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func main() {
	ch := make(chan struct{})
	done := make(chan struct{})
	for i := 0; i < 100; i++ {
		go func() {
			<-ch
			done <- struct{}{}
		}()
	}
	go func() {
		time.Sleep(6 * time.Second)
		done <- struct{}{}
	}()
	// Let every goroutine reach its wait before the window opens.
	time.Sleep(100 * time.Millisecond)
	before := cpuTime()
	time.Sleep(5 * time.Second)
	used := cpuTime() - before
	close(ch)
	for i := 0; i < 101; i++ {
		<-done
	}
	fmt.Printf("idle: %.3f ms of CPU in 5 s (GOMAXPROCS from the environment)\n",
		float64(used)/1e6)
}
