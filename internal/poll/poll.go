// Package poll waits for a condition by asking again, with exponential
// backoff, until it holds, fails or the context ends. It is the one
// polling loop of kindtest and its internal packages.
package poll

import (
	"context"
	"time"
)

// Until calls cond until it reports done or returns an error, or ctx
// ends. The first call is at once; the wait before each next one starts
// at first and doubles up to limit. It returns nil once cond is done,
// cond's error, or ctx.Err() when ctx ends first; cond should watch ctx
// itself in calls that block.
func Until(ctx context.Context, first, limit time.Duration, cond func() (bool, error)) error {
	delay := first
	for {
		done, err := cond()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, limit)
	}
}
