// Echo server with Go's net package, for the purloin::net comparison table (same client:
// purloin's runtime/examples/echo_client.rs). One goroutine per connection, read -> write,
// TCP_NODELAY (Go's default). Loopback only; prints "listening on <addr>" and exits after
// -for seconds.
//
//	go build -o /tmp/echo-go bench-go/net/echo_server.go
//	cargo run --release -p purloin --example echo_client -- \
//	    --compare purloin,tokio,may,std,go --go-server /tmp/echo-go
//
// GOMAXPROCS is set by the client (--server-workers, default 2).
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7878", "loopback address to listen on")
	runFor := flag.Int("for", 300, "exit after this many seconds")
	flag.Parse()
	host, _, err := net.SplitHostPort(*addr)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		fmt.Fprintf(os.Stderr, "echo_server.go: %s is not a loopback address\n", *addr)
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("listening on %s\n", ln.Addr())
	go func() {
		time.Sleep(time.Duration(*runFor) * time.Second)
		os.Exit(0)
	}()
	for {
		conn, err := ln.Accept()
		if err != nil {
			continue
		}
		go func(c net.Conn) {
			defer c.Close()
			buf := make([]byte, 4096)
			for {
				n, err := c.Read(buf)
				if err != nil {
					return
				}
				if _, err := c.Write(buf[:n]); err != nil {
					return
				}
			}
		}(conn)
	}
}
