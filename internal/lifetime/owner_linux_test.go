package lifetime

import "testing"

func TestParseStat(t *testing.T) {
	for _, c := range []struct {
		line    string
		start   string
		running bool
	}{
		{"1234 (go) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 4 0 98765 1000 10 0\n", "98765", true},
		// A command name with spaces and ')' in it.
		{"1234 (a) b (c)) R 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 4 0 42 1000 10 0\n", "42", true},
		{"1234 (dead) Z 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 4 0 42 1000 10 0\n", "", false},
		{"1234 (short) S 1\n", "", true},
	} {
		start, running := parseStat(c.line)
		if start != c.start || running != c.running {
			t.Errorf("parseStat(%q) = %q, %t; want %q, %t", c.line, start, running, c.start, c.running)
		}
	}
}
