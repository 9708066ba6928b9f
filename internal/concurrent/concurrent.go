// Package concurrent runs independent steps at once.
package concurrent

import (
	"errors"
	"sync"
)

// Each runs fn(0) to fn(n-1) at once, waits for all, and joins their
// errors.
func Each(n int, fn func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
