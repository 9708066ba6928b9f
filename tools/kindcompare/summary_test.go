package main

import (
	"strings"
	"testing"
	"time"
)

func TestStatsOf(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		in   []time.Duration
		want stats
	}{
		{[]time.Duration{3 * s, 1 * s, 2 * s}, stats{3, 2 * s, 1 * s, 3 * s}},
		{[]time.Duration{4 * s, 1 * s, 2 * s, 3 * s}, stats{4, 2500 * time.Millisecond, 1 * s, 4 * s}},
		{nil, stats{}},
	} {
		if got := statsOf(tc.in); got != tc.want {
			t.Errorf("statsOf(%v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestSummarizeSkipsWarmup(t *testing.T) {
	var b strings.Builder
	summarize(&b, []sample{
		{side: "kind", warmup: true, ready: 100 * time.Second},
		{side: "kind", ready: 30 * time.Second, created: 20 * time.Second},
		{side: "kindtest", ready: 10 * time.Second},
		{side: "kindtest", ready: 50 * time.Second, others: []string{"kt-1-control-plane"}},
	})
	out := b.String()
	for _, want := range []string{"kind: to ready  1  30.0  30.0  30.0", "kind: create returned  1  20.0", "kindtest: to ready  1  10.0", "left out: 1 run(s)"} {
		if !strings.Contains(strings.Join(strings.Fields(out), "  "), strings.Join(strings.Fields(want), "  ")) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}
