package bench

import (
	"sync"
	"sync/atomic"
)

// Parallel runs f(i) for i in [0,n) on k goroutines and returns the first
// error; after one, the goroutine that met it stops and the others finish
// what they took.
func Parallel(n, k int, f func(i int) error) error {
	var next atomic.Int64
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for range k {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}
