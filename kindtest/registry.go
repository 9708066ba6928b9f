package kindtest

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/kindtest/kindtest/internal/concurrent"
)

// The clusters this process has and has not yet deleted, so that an
// interrupt or termination signal can remove them before the process ends.
var (
	liveMu     sync.Mutex
	live       = map[*Cluster]struct{}{}
	signalOnce sync.Once
)

func register(c *Cluster) {
	signalOnce.Do(watchSignals)
	liveMu.Lock()
	live[c] = struct{}{}
	liveMu.Unlock()
}

func unregister(c *Cluster) {
	liveMu.Lock()
	delete(live, c)
	liveMu.Unlock()
}

// watchSignals removes every live cluster on SIGINT or SIGTERM, then lets
// the signal take its usual course. Go's own handling would end the
// process at once and leave the clusters behind.
func watchSignals() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-ch
		deleteAllLive(time.Minute)
		signal.Stop(ch)
		signal.Reset(sig)
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			_ = p.Signal(sig)
		}
		time.Sleep(time.Second) // the signal ends the process
		os.Exit(2)
	}()
}

// deleteAllLive deletes every live cluster, in parallel, within timeout.
func deleteAllLive(timeout time.Duration) {
	liveMu.Lock()
	cs := make([]*Cluster, 0, len(live))
	for c := range live {
		cs = append(cs, c)
	}
	liveMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_ = concurrent.Each(len(cs), func(i int) error {
		// A reusable cluster stays; its lock ends with the process.
		if cs[i].cfg.keep == KeepAlways || (cs[i].cfg.reuse && cs[i].ready) {
			return nil
		}
		cs[i].log.Printf("kindtest: %s: removing cluster before the process ends", cs[i].name)
		return cs[i].remove(ctx)
	})
}
