package poll

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestUntilDone(t *testing.T) {
	calls := 0
	err := Until(context.Background(), time.Millisecond, 4*time.Millisecond, func() (bool, error) {
		calls++
		return calls == 5, nil
	})
	if err != nil || calls != 5 {
		t.Fatalf("Until = %v after %d calls, want nil after 5", err, calls)
	}
}

func TestUntilCondError(t *testing.T) {
	boom := errors.New("boom")
	err := Until(context.Background(), time.Millisecond, time.Millisecond, func() (bool, error) { return false, boom })
	if err != boom {
		t.Fatalf("Until = %v, want cond's error", err)
	}
}

func TestUntilContextEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	calls := 0
	err := Until(ctx, time.Millisecond, 2*time.Millisecond, func() (bool, error) { calls++; return false, nil })
	if !errors.Is(err, context.DeadlineExceeded) || calls < 2 {
		t.Fatalf("Until = %v after %d calls, want the deadline after several", err, calls)
	}
}

func TestUntilBacksOff(t *testing.T) {
	var at []time.Time
	err := Until(context.Background(), 5*time.Millisecond, 20*time.Millisecond, func() (bool, error) {
		at = append(at, time.Now())
		return len(at) == 5, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Waits of at least 5, 10, 20 and 20 ms.
	for i, want := range []time.Duration{5, 10, 20, 20} {
		if got := at[i+1].Sub(at[i]); got < want*time.Millisecond {
			t.Errorf("wait %d: %v, want at least %v ms", i, got, want)
		}
	}
}
