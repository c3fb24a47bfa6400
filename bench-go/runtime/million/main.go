// Go twin of purloin's runtime/benches/profile/million.rs: a million parked goroutines, then
// all woken and joined.
// Run: cd bench-go/runtime/million && GOMAXPROCS=2 go run main.go [n] [rounds]
//
// main spawns n goroutines; each bumps a counter and blocks receiving from one unbuffered
// channel. Spawn until parked ends when the counter reaches n (Go offers no count of parked
// goroutines; purloin's twin also waits for every run queue to drain). Then main closes the
// channel and waits on a WaitGroup: wake + join. Printed per round: both phases, RSS per
// parked goroutine (VmRSS at peak minus before, over n) and the memory mappings.
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func statusKiB(field string) int {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, field) {
			v, _ := strconv.Atoi(strings.Fields(l)[1])
			return v
		}
	}
	return 0
}

func mappings() int {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}

func main() {
	n, rounds := 1000000, 1
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	if len(os.Args) > 2 {
		rounds, _ = strconv.Atoi(os.Args[2])
	}
	for r := 0; r < rounds; r++ {
		rssBefore, mapsBefore := statusKiB("VmRSS:"), mappings()
		t := time.Now()
		ch := make(chan struct{})
		var arrived atomic.Int64
		var wg sync.WaitGroup
		wg.Add(n)
		for i := 0; i < n; i++ {
			go func() {
				defer wg.Done()
				arrived.Add(1)
				<-ch
			}()
		}
		for arrived.Load() != int64(n) {
			time.Sleep(time.Millisecond)
		}
		spawnParked := time.Since(t)
		rssPeak, mapsPeak := statusKiB("VmRSS:"), mappings()
		t = time.Now()
		close(ch)
		wg.Wait()
		wakeJoin := time.Since(t)
		fmt.Printf("round %d: n %d, GOMAXPROCS %s | spawn until parked %.3f s | wake + join %.3f s "+
			"| %.2f KiB per parked goroutine (RSS %.0f -> %.0f MiB) | mappings %d -> %d -> %d "+
			"| RSS after join %.0f MiB\n",
			r, n, os.Getenv("GOMAXPROCS"), spawnParked.Seconds(), wakeJoin.Seconds(),
			float64(rssPeak-rssBefore)/float64(n), float64(rssBefore)/1024, float64(rssPeak)/1024,
			mapsBefore, mapsPeak, mappings(), float64(statusKiB("VmRSS:"))/1024)
	}
	fmt.Printf("peak RSS (VmHWM) %.0f MiB\n", float64(statusKiB("VmHWM:"))/1024)
}
