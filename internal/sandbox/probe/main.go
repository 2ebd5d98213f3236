package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe read|write|dial|listen|alloc|fork|sleep ARGS")
		os.Exit(2)
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "read":
		for _, p := range args {
			b, err := os.ReadFile(p)
			if err != nil {
				fmt.Printf("read %s: denied: %v\n", p, err)
				continue
			}
			fmt.Printf("read %s: ok: %q\n", p, b)
		}
	case "write":
		for _, p := range args {
			if err := os.WriteFile(p, []byte("written by a tenant\n"), 0o644); err != nil {
				fmt.Printf("write %s: denied: %v\n", p, err)
				continue
			}
			fmt.Printf("write %s: ok\n", p)
		}
	case "dial":
		for _, a := range args {
			c, err := net.DialTimeout("tcp", a, 2*time.Second)
			if err != nil {
				fmt.Printf("dial %s: denied: %v\n", a, err)
				continue
			}
			c.Close()
			fmt.Printf("dial %s: ok\n", a)
		}
	case "listen":
		host, _ := os.Hostname()
		fmt.Println("listening on", args[0])
		err := http.ListenAndServe(args[0], http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, "hello from %s\n", host)
		}))
		fmt.Println("listen:", err)
		os.Exit(1)
	case "alloc":
		// Allocates MiB by MiB, touching each page, up to the count given.
		n, _ := strconv.Atoi(args[0])
		var keep [][]byte
		for i := 1; i <= n; i++ {
			b := make([]byte, 1<<20)
			for j := 0; j < len(b); j += 4096 {
				b[j] = 1
			}
			keep = append(keep, b)
			if i%16 == 0 {
				fmt.Printf("allocated %d MiB\n", i)
			}
		}
		fmt.Printf("alloc: ok: %d MiB\n", len(keep))
	case "fork":
		// Starts up to N children that sleep, and says how many started.
		n, _ := strconv.Atoi(args[0])
		started := 0
		var cmds []*exec.Cmd
		for range n {
			c := exec.Command("/proc/self/exe", "sleep", "30")
			if err := c.Start(); err != nil {
				fmt.Printf("fork: stopped after %d: %v\n", started, err)
				break
			}
			cmds = append(cmds, c)
			started++
		}
		fmt.Printf("fork: started %d of %d\n", started, n)
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	case "sleep":
		d, _ := strconv.Atoi(args[0])
		time.Sleep(time.Duration(d) * time.Second)
	default:
		fmt.Fprintln(os.Stderr, "unknown probe", os.Args[1])
		os.Exit(2)
	}
}
