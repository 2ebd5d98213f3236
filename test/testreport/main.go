package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	times := flag.String("times", "", "write every package's and test's time to this file")
	top := flag.Int("top", 15, "how many of the slowest packages and tests to list")
	every := flag.Duration("progress", 5*time.Minute, "print the run's progress this often (0: never)")
	flag.Parse()
	r := newReport(os.Stdout, *top, time.Now, readCPU)
	if *every > 0 {
		go func() {
			for range time.Tick(*every) {
				r.progress()
			}
		}()
	}
	if err := r.read(os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
	if err := r.finish(*times); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
}
