package kindtest_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kindtest/kindtest/kindtest"
)

// TestContextEndNamedInError: a creation that a context ended, on an
// engine that answered all along, says whose deadline or cancel it was and
// during which phase, and does not blame the engine; it leaves nothing.
func TestContextEndNamedInError(t *testing.T) {
	dc := engine(t)
	img := nodeImage(t, dc)
	for _, tc := range []struct {
		name string
		// newCtx returns the context New is given, and the option and
		// hook that end creation.
		newCtx func(cancel context.CancelFunc) (context.Context, []kindtest.Option, func(string))
		want   []string
	}{
		{
			name: "create timeout",
			newCtx: func(context.CancelFunc) (context.Context, []kindtest.Option, func(string)) {
				return context.Background(), []kindtest.Option{kindtest.WithCreateTimeout(2 * time.Second)}, nil
			},
			want: []string{"the create timeout (2s) passed during the ", " phase: raise it with WithCreateTimeout"},
		},
		{
			name: "caller's deadline",
			newCtx: func(context.CancelFunc) (context.Context, []kindtest.Option, func(string)) {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				t.Cleanup(cancel)
				return ctx, nil, nil
			},
			want: []string{"the caller's context deadline passed during the ", "before the create timeout (5m0s)"},
		},
		{
			name: "caller's cancel",
			newCtx: func(cancel context.CancelFunc) (context.Context, []kindtest.Option, func(string)) {
				return nil, nil, func(string) { cancel() }
			},
			want: []string{"creation cancelled by the caller during the containers phase"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ctx, opts, fn := tc.newCtx(cancel)
			if ctx == nil {
				ctx = cctx
			}
			hook := &phaseHook{t: t, marker: "network done", fn: func(string) {}}
			if fn != nil {
				hook.fn = fn
			}
			c, err := kindtest.New(ctx, append([]kindtest.Option{kindtest.WithImage(img), kindtest.WithLogger(hook)}, opts...)...)
			if err == nil {
				_ = c.Delete(context.Background())
				t.Fatal("creation went on after its context ended")
			}
			t.Logf("error: %v", err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error lacks %q", w)
				}
			}
			if strings.Contains(err.Error(), "stopped answering") {
				t.Error("the error blames the engine, which answered all along")
			}
			if n := leftovers(t, dc, map[string]string{kindtest.LabelCluster: hook.name}); n != 0 {
				t.Errorf("%d object(s) left", n)
			}
		})
	}
}

// socketProxy forwards connections on a unix socket of its own to the
// engine, until it is cut off: then its socket is gone and every
// connection through it closed, which from its clients' side is an engine
// that went away.
type socketProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func startSocketProxy(t *testing.T, engineHost string) (*socketProxy, string) {
	t.Helper()
	network, addr, ok := strings.Cut(engineHost, "://")
	if !ok || (network != "unix" && network != "tcp") {
		t.Fatalf("engine at %q: the proxy forwards to unix:// or tcp:// engines", engineHost)
	}
	sock := filepath.Join(t.TempDir(), "engine.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	p := &socketProxy{ln: ln}
	t.Cleanup(p.cut)
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial(network, addr)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	return p, "unix://" + sock
}

// cut closes the proxy's socket (which removes its file) and every
// connection through it.
func (p *socketProxy) cut() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestEngineGoneMidCreate: a process whose engine goes away while it
// creates a cluster (its engine socket, a proxy to the real engine, is cut
// off after the containers phase) fails saying the engine stopped
// answering, not that a deadline passed.
func TestEngineGoneMidCreate(t *testing.T) {
	dc := engine(t)
	nodeImage(t, dc)
	proxy, host := startSocketProxy(t, dc.Host())
	cmd := exec.Command(os.Args[0])
	// Without a reaper: one would reach the engine through the proxy too.
	cmd.Env = append(os.Environ(), childEnv+"=create", "DOCKER_HOST="+host, "KINDTEST_REAPER=off", childDeleteTimeoutEnv+"=5s")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var output strings.Builder
	var name string
	cut := false
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		t.Log("child: " + line)
		output.WriteString(line + "\n")
		if m := regexp.MustCompile(`creating cluster (\S+)`).FindStringSubmatch(line); m != nil {
			name = m[1]
			// Whatever happens next, the cluster goes with the test.
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				if err := kindtest.DeleteCluster(ctx, name); err != nil && !strings.Contains(err.Error(), "no such cluster") {
					t.Errorf("remove the child's cluster through the real engine: %v", err)
				}
			})
		}
		if !cut && strings.Contains(line, "containers done") {
			proxy.cut()
			cut = true
		}
	}
	waitErr := cmd.Wait()
	if !cut {
		t.Fatalf("the child never reached the containers phase (%v)", waitErr)
	}
	var ee *exec.ExitError
	if !errors.As(waitErr, &ee) {
		t.Fatalf("child: %v, want it to fail", waitErr)
	}
	msg := output.String()
	if !strings.Contains(msg, "create failed") || !strings.Contains(msg, "stopped answering while cluster "+name+" was being made") {
		t.Errorf("the child's error does not say the engine stopped answering")
	}
	// (The removal that followed may have run into its own deadline.)
	for _, w := range []string{"create timeout", "caller's", "test binary's deadline", "cancelled"} {
		if strings.Contains(msg, w) {
			t.Errorf("the child's error speaks of %q: the engine went away, no creation context ended", w)
		}
	}
}
