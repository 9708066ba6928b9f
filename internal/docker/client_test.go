package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestIsUnreachable(t *testing.T) {
	host, _, srv := startFakeEngine(t, "1.45", "26.1.5")
	c, err := NewHost(context.Background(), host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.InspectContainer(context.Background(), "x") // the fake answers 404
	if !IsNotFound(err) || IsUnreachable(err) {
		t.Errorf("a refused request reads as unreachable: %v", err)
	}
	srv.Close() // the engine goes away
	_, err = c.InspectContainer(context.Background(), "x")
	if !IsUnreachable(err) {
		t.Errorf("an engine that went away: %v (%T) not unreachable", err, err)
	}
	if c.Answers() {
		t.Error("an engine that went away answers")
	}
	if IsUnreachable(nil) || IsUnreachable(errors.New("conflict")) {
		t.Error("unrelated errors read as unreachable")
	}
}

// hangingEngine answers pings and leaves every other request unanswered
// until the request is given up.
func hangingEngine(t *testing.T) *Client {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/_ping", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("API-Version", "1.45")
		w.Header().Set("OSType", "linux")
		fmt.Fprint(w, "OK")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/version") {
			fmt.Fprint(w, `{"Version":"26.1.5","ApiVersion":"1.45"}`)
			return
		}
		<-r.Context().Done()
	})
	c, err := NewHost(context.Background(), serveUnix(t, mux))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestContextEndIsNotUnreachable: a request that a deadline or a cancel
// cut short, on an engine that answers, does not read as an engine that
// stopped answering (the SDK reports a deadline as a net.Error).
func TestContextEndIsNotUnreachable(t *testing.T) {
	c := hangingEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.InspectContainer(ctx, "x")
	var netErr net.Error
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &netErr) {
		t.Fatalf("deadline: got %v (%T), want a context.DeadlineExceeded that is a net.Error", err, err)
	}
	if IsUnreachable(err) {
		t.Errorf("our deadline reads as unreachable: %v", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err = c.InspectContainer(ctx, "x")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancel: got %v, want context.Canceled", err)
	}
	if IsUnreachable(err) {
		t.Errorf("a cancel reads as unreachable: %v", err)
	}
	if !c.Answers() {
		t.Error("the engine answers pings, Answers says no")
	}
}

// TestIsUnreachableShapes covers the shapes errors reach the classifier
// in: wrapped, joined, a removal's deadline beside its last round's error.
func TestIsUnreachableShapes(t *testing.T) {
	reset := &url.Error{Op: "Get", URL: "http://docker/x", Err: &net.OpError{Op: "read", Net: "unix", Err: os.NewSyscallError("read", syscall.ECONNRESET)}}
	refused := &net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	deadline := &url.Error{Op: "Get", URL: "http://docker/x", Err: context.DeadlineExceeded}
	// A dial that the context's deadline ended: the net package's own
	// timeout error, which says it is context.DeadlineExceeded.
	dialDeadline := func() error {
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		defer cancel()
		_, err := (&net.Dialer{}).DialContext(ctx, "unix", filepath.Join(t.TempDir(), "none.sock"))
		return err
	}()
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"deadline", context.DeadlineExceeded, false},
		{"cancel", context.Canceled, false},
		{"deadline in a url.Error", deadline, false},
		{"deadline wrapped", fmt.Errorf("node x: start container: %w", deadline), false},
		{"dial cut short by a deadline", dialDeadline, false},
		{"reset", reset, true},
		{"refused", fmt.Errorf("create network: %w", refused), true},
		{"cut off", fmt.Errorf("exec: %w", io.ErrUnexpectedEOF), true},
		{"i/o timeout of the connection", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, true},
		{"removal deadline with a reset last", fmt.Errorf("remove objects: %w (%w)", context.DeadlineExceeded, reset), true},
		{"removal deadline with a refusal last", fmt.Errorf("remove objects: %w (%w)", context.DeadlineExceeded, errors.New("conflict")), false},
		{"joined", errors.Join(deadline, fmt.Errorf("delete: %w", refused)), true},
		{"wrapped join of deadlines", fmt.Errorf("x: %w", errors.Join(deadline, context.Canceled)), false},
		{"a file missing", &os.PathError{Op: "open", Path: "/x", Err: syscall.ENOENT}, false},
	} {
		if got := IsUnreachable(tc.err); got != tc.want {
			t.Errorf("%s: IsUnreachable(%v) = %t, want %t", tc.name, tc.err, got, tc.want)
		}
	}
	if dialDeadline == nil || !errors.Is(dialDeadline, context.DeadlineExceeded) {
		t.Errorf("the dial with a past deadline: %v, want context.DeadlineExceeded", dialDeadline)
	}
}

// TestAPINegotiation connects to fake engines of Docker 20.10, 26 and 29
// and checks the version each connection settles on: the engine's own
// where the SDK speaks it, the SDK's newest where the engine is newer.
func TestAPINegotiation(t *testing.T) {
	for _, tc := range []struct{ engine, api, want string }{
		{"20.10.24", "1.41", "1.41"},
		{"26.1.5", "1.45", "1.45"},
		{"29.8.0", "1.56", SDKAPIVersion},
	} {
		t.Run(tc.engine, func(t *testing.T) {
			host, _, _ := startFakeEngine(t, tc.api, tc.engine)
			c, err := NewHost(context.Background(), host)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			v, err := c.APIVersions(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if v.Negotiated != tc.want || v.Engine != tc.api || v.EngineVersion != tc.engine {
				t.Errorf("versions = %+v, want negotiated %s with engine API %s of Docker %s", v, tc.want, tc.api, tc.engine)
			}
			if err := v.Check(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestAPIVersionsCheckFails checks that a negotiation that went wrong is
// an error naming what was negotiated and what should have been.
func TestAPIVersionsCheckFails(t *testing.T) {
	for _, tc := range []struct {
		v    APIVersions
		want string
	}{
		{APIVersions{Negotiated: "1.24", Engine: "1.56", EngineMin: "1.44", EngineVersion: "29.8.0"}, "negotiated API 1.24 with Docker 29.8.0, want " + SDKAPIVersion},
		{APIVersions{Negotiated: "1.44", Engine: "1.45", EngineMin: "1.24", EngineVersion: "26.1.5"}, "want 1.45"},
		{APIVersions{Negotiated: "1.45", Engine: "1.45", EngineMin: "1.46", EngineVersion: "x"}, "serves 1.46 and newer only"},
		{APIVersions{Negotiated: "1.40", Engine: "1.40", EngineMin: "1.24", EngineVersion: "19.03"}, "kindtest needs " + MinAPIVersion},
		{APIVersions{Negotiated: "1.51", EngineVersion: "29.8.0"}, "reports no API version"},
	} {
		err := tc.v.Check()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check(%+v) = %v, want an error containing %q", tc.v, err, tc.want)
		}
	}
}

func TestRootlessAndControllers(t *testing.T) {
	for _, c := range []struct {
		opts []string
		want bool
	}{
		{[]string{"name=seccomp,profile=default", "name=rootless", "name=cgroupns"}, true},
		{[]string{"name=apparmor", "name=seccomp,profile=default", "name=cgroupns"}, false},
		{[]string{"name=seccomp,profile=default", "rootless"}, true},
		{nil, false},
	} {
		if got := rootless(c.opts); got != c.want {
			t.Errorf("rootless(%q) = %v, want %v", c.opts, got, c.want)
		}
	}
	if got := strings.Join(controllers(false, false, true, true), " "); got != "memory pids" {
		t.Errorf("controllers: %q, want memory pids", got)
	}
	if got := strings.Join(controllers(true, true, true, true), " "); got != "cpu cpuset memory pids" {
		t.Errorf("controllers: %q", got)
	}
}
