package kindtest

import (
	"testing"

	"github.com/kindtest/kindtest/internal/lifetime"
)

// TestEnding checks the one decision of how a cluster ends, for every
// path's outcome: a ready reusable cluster is released however its run
// ends (a signal and the test binary's deadline included), Delete removes
// whatever the keep policy, and the lifetime rule decides the rest.
func TestEnding(t *testing.T) {
	all := []lifetime.Outcome{lifetime.Passed, lifetime.Failed, lifetime.Interrupted, lifetime.Deleted}
	for _, tc := range []struct {
		what          string
		keep          string
		reuse, ready  bool
		marked        bool
		want, deleted ending // want for every outcome but Failed and Deleted
		failed        ending
	}{
		{what: "default", keep: lifetime.KeepNever, want: endRemove, failed: endRemove, deleted: endRemove},
		{what: "on-failure", keep: lifetime.KeepOnFailure, want: endRemove, failed: endKeep, deleted: endRemove},
		{what: "on-failure, marked kept", keep: lifetime.KeepOnFailure, marked: true, want: endKeep, failed: endKeep, deleted: endRemove},
		{what: "always", keep: lifetime.KeepAlways, want: endKeep, failed: endKeep, deleted: endRemove},
		{what: "reusable, ready", keep: lifetime.KeepReuse, reuse: true, ready: true, marked: true, want: endRelease, failed: endRelease, deleted: endRelease},
		{what: "reusable, half-made", keep: lifetime.KeepReuse, reuse: true, want: endRemove, failed: endRemove, deleted: endRemove},
	} {
		c := &Cluster{cfg: defaultConfig(), identity: identity{name: "kt-x", labels: map[string]string{LabelKeep: tc.keep}}}
		c.cfg.reuse = tc.reuse
		c.life.ready, c.life.marked = tc.ready, tc.marked
		for _, o := range all {
			want := tc.want
			switch o {
			case lifetime.Failed:
				want = tc.failed
			case lifetime.Deleted:
				want = tc.deleted
			}
			if got := c.ending(o); got != want {
				t.Errorf("%s, %s: ending %d, want %d", tc.what, o, got, want)
			}
		}
	}
}
