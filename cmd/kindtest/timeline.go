package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/kindtest/kindtest/kindtest"
)

// A timeline is when things happened while a cluster was created, as
// offsets from the call to kindtest.New: what bench -timeline prints, to
// see where the seconds of a phase go. Events come from the host (Start's
// progress log: phase ends, readiness conditions met) and from the first
// control plane (systemd units, containerd's sandbox and container starts,
// the components' first log lines, kubeadm's phases). The node's clock is
// the host's: bench -timeline is for an engine on the test's host.
type timeline map[string]time.Duration

// timelineLogger records when Start's progress lines were logged.
type timelineLogger struct {
	mu    sync.Mutex
	start time.Time
	lines []timedLine
}

type timedLine struct {
	at   time.Time
	line string
}

func (l *timelineLogger) Printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, timedLine{time.Now(), fmt.Sprintf(format, args...)})
}

// hostEvents are the phase ends and readiness conditions of Start's log:
// "kindtest: NAME: init done in 4.2s", "kindtest: NAME: nodes Ready after 1s".
var hostEvent = regexp.MustCompile(`^kindtest: [^:]+: (.+?) (done in|after) \S+$`)

func (l *timelineLogger) events(tl timeline) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range l.lines {
		if m := hostEvent.FindStringSubmatch(t.line); m != nil {
			name := "host: " + m[1]
			if m[2] == "done in" {
				name += " done"
			}
			tl.add(name, t.at.Sub(l.start))
		}
	}
}

// add keeps the first time an event happened.
func (tl timeline) add(name string, d time.Duration) {
	if old, ok := tl[name]; !ok || d < old {
		tl[name] = d
	}
}

// timelineScript prints, inside a node, the raw material of its timeline,
// in sections marked "== NAME".
const timelineScript = `
echo "== units"
for u in containerd kubelet; do
  echo "$u $(systemctl show -p ActiveEnterTimestamp --value --timestamp=us+utc $u)"
done
echo "== containerd"
journalctl -u containerd -o cat --no-pager | grep -E 'RunPodSandbox for|CreateContainer within sandbox .* returns container id|StartContainer for .* returns successfully'
echo "== kubelet"
journalctl -u kubelet -o cat --no-pager | grep -E 'Successfully registered node|Started kubelet' | head -n 5
for f in /var/log/pods/*/*/0.log; do
  [ -f "$f" ] || continue
  echo "== log $f"
  head -n 1 "$f"
  grep -E 'Serving securely on|Caches are synced|Successfully acquired lease|Starting controllers' "$f" | head -n 50 || true
done
echo "== kubeadm"
cat /etc/kindtest/kubeadm-init.log 2>/dev/null || true
`

var (
	unitLine       = regexp.MustCompile(`^(\S+) \w{3} (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}) UTC$`)
	containerdTime = regexp.MustCompile(`time="([^"]+)"`)
	sandboxName    = regexp.MustCompile(`RunPodSandbox for name:\\?"([^"\\]+)\\?"`)
	containerName  = regexp.MustCompile(`CreateContainer within sandbox \\?"\w+\\?" for name:\\?"([^"\\]+)\\?" returns container id \\?"(\w+)`)
	startedID      = regexp.MustCompile(`StartContainer for \\?"(\w+)\\?" returns successfully`)
	podLogPath     = regexp.MustCompile(`/var/log/pods/[^_]+_([^_]+)_[^/]+/([^/]+)/0\.log$`)
	klogLine       = regexp.MustCompile(`^[IWEF](\d{4} \d\d:\d\d:\d\d\.\d{6})\s`)
	kubeadmPhase   = regexp.MustCompile(`^\[([a-z-]+)\]`)
)

// logKeys are the lines of the components' logs a timeline shows (the
// first of each), besides the first line: when each serves, when its
// caches are synced.
var logKeys = []string{"Serving securely on", "Caches are synced", "Successfully acquired lease", "Starting controllers"}

// nodeTimeline adds the events of node n to tl, as offsets from start.
func nodeTimeline(ctx context.Context, n *kindtest.Node, start time.Time, tl timeline) error {
	res, err := n.Exec(ctx, "sh", "-c", timelineScript)
	if err != nil {
		return fmt.Errorf("timeline of %s: %w", n.Name(), err)
	}
	parseNodeTimeline(strings.NewReader(res.Stdout), n.Name(), start, tl)
	return nil
}

// parseNodeTimeline reads what timelineScript printed on node (named so
// that pod names lose it: "etcd-NODE" is "etcd").
func parseNodeTimeline(r io.Reader, node string, start time.Time, tl timeline) {
	at := func(name string, t time.Time) {
		if !t.IsZero() {
			tl.add(name, t.Sub(start))
		}
	}
	section, logName := "", ""
	containers := map[string]string{} // container id to name
	var lastKlog time.Time
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if s, ok := strings.CutPrefix(line, "== "); ok {
			section, logName = s, ""
			if p, ok := strings.CutPrefix(s, "log "); ok {
				section = "log"
				if m := podLogPath.FindStringSubmatch(p); m != nil {
					logName = podName(m[1], node) + "/" + m[2]
				}
			}
			continue
		}
		switch section {
		case "units":
			if m := unitLine.FindStringSubmatch(line); m != nil {
				t, _ := time.Parse("2006-01-02 15:04:05.000000", m[2])
				at("unit "+m[1]+" active", t)
			}
		case "containerd":
			m := containerdTime.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			t, err := time.Parse(time.RFC3339Nano, m[1])
			if err != nil {
				continue
			}
			if s := sandboxName.FindStringSubmatch(line); s != nil {
				if strings.Contains(line, "returns sandbox id") {
					at("sandbox ready "+podName(s[1], node), t)
				} else {
					at("sandbox asked "+podName(s[1], node), t)
				}
			} else if c := containerName.FindStringSubmatch(line); c != nil {
				containers[c[2]] = c[1]
				at("created "+c[1], t)
			} else if s := startedID.FindStringSubmatch(line); s != nil {
				if name, ok := containers[s[1]]; ok {
					at("started "+name, t)
				}
			}
		case "kubelet":
			if t := klogTime(line, start); !t.IsZero() {
				switch {
				case strings.Contains(line, "Successfully registered node"):
					at("kubelet: node registered", t)
				case strings.Contains(line, "Started kubelet"):
					at("kubelet: started", t)
				}
			}
		case "log":
			// A CRI log line: TIME STREAM TAG MESSAGE.
			f := strings.SplitN(line, " ", 4)
			if logName == "" || len(f) < 4 {
				continue
			}
			t, err := time.Parse(time.RFC3339Nano, f[0])
			if err != nil {
				continue
			}
			name := "log " + logName + ": first line"
			if _, seen := tl[name]; seen {
				for _, key := range logKeys {
					if strings.Contains(f[3], key) {
						name = "log " + logName + ": " + key
					}
				}
			}
			at(name, t)
		case "kubeadm":
			// kubeadm prints its phases without a time: each is dated by
			// the klog line before it.
			if t := klogTime(line, start); !t.IsZero() {
				lastKlog = t
			} else if m := kubeadmPhase.FindStringSubmatch(line); m != nil {
				at("kubeadm ["+m[1]+"]", lastKlog)
			}
		}
	}
	if !lastKlog.IsZero() {
		at("kubeadm: last line", lastKlog)
	}
}

// klogTime is the time of a klog line ("I1201 11:20:33.123456 ..."),
// which has no year: start's is taken.
func klogTime(line string, start time.Time) time.Time {
	m := klogLine.FindStringSubmatch(line)
	if m == nil {
		return time.Time{}
	}
	t, err := time.Parse("0102 15:04:05.000000", m[1])
	if err != nil {
		return time.Time{}
	}
	return t.AddDate(start.UTC().Year(), 0, 0)
}

// podName is a pod's name without what makes it unique: the node's name
// of a static pod, the random suffix of a DaemonSet's pod, and of a
// Deployment's the ReplicaSet's hash as well.
func podName(pod, node string) string {
	if s, ok := strings.CutSuffix(pod, "-"+node); ok {
		return s
	}
	parts := strings.Split(pod, "-")
	if n := len(parts); n > 1 && len(parts[n-1]) == 5 {
		parts = parts[:n-1]
		if n := len(parts); n > 1 && len(parts[n-1]) >= 6 && strings.Trim(parts[n-1], podHashAlphabet) == "" {
			parts = parts[:n-1]
		}
	}
	return strings.Join(parts, "-")
}

// podHashAlphabet is the characters of generated names: no vowels.
const podHashAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// timelineStats gathers the timelines of the runs of one size.
type timelineStats struct {
	mu     sync.Mutex
	events map[string][]time.Duration
}

func (s *timelineStats) add(tl timeline) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.events == nil {
		s.events = map[string][]time.Duration{}
	}
	for name, d := range tl {
		s.events[name] = append(s.events[name], d)
	}
}

// print writes one row per event, in the order of their median times.
func (s *timelineStats) print(out io.Writer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	type row struct {
		name string
		d    []time.Duration
	}
	var rows []row
	for name, d := range s.events {
		d = slices.Clone(d)
		slices.Sort(d)
		rows = append(rows, row{name, d})
	}
	slices.SortFunc(rows, func(a, b row) int {
		return int(percentile(a.d, 0.5) - percentile(b.d, 0.5))
	})
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "event, since New\tn\tmin\tp50\tmax\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t\n", r.name, len(r.d), round(r.d[0]), round(percentile(r.d, 0.5)), round(r.d[len(r.d)-1]))
	}
	tw.Flush()
}
