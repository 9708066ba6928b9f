package main

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// stats are the median, minimum and maximum of some durations.
type stats struct {
	n                int
	median, min, max time.Duration
}

func statsOf(ds []time.Duration) stats {
	if len(ds) == 0 {
		return stats{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return stats{n: len(s), median: m, min: s[0], max: s[len(s)-1]}
}

// summarize prints, per side in the order first seen, the statistics of
// the measured samples' time to ready, and for kind those of the time
// `kind create cluster` took. Warm-up runs are left out, and so are runs
// during which another user's cluster ran (they are counted).
func summarize(w io.Writer, samples []sample) {
	var sides []string
	ready := map[string][]time.Duration{}
	created := map[string][]time.Duration{}
	contended := 0
	for _, s := range samples {
		if s.warmup {
			continue
		}
		if len(s.others) > 0 {
			contended++
			continue
		}
		if !slices.Contains(sides, s.side) {
			sides = append(sides, s.side)
		}
		ready[s.side] = append(ready[s.side], s.ready)
		if s.created > 0 {
			created[s.side] = append(created[s.side], s.created)
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "side\truns\tmedian (s)\tmin (s)\tmax (s)\t")
	row := func(name string, st stats) {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t\n", name, st.n, st.median.Seconds(), st.min.Seconds(), st.max.Seconds())
	}
	for _, side := range sides {
		row(side+": to ready", statsOf(ready[side]))
		if len(created[side]) > 0 {
			row(side+": create returned", statsOf(created[side]))
		}
	}
	tw.Flush()
	if contended > 0 {
		fmt.Fprintf(w, "left out: %d run(s) during which another user's cluster ran\n", contended)
	}
}
