package kindtest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kindtest/kindtest/internal/enginetest"
	"github.com/kindtest/kindtest/internal/fixture"
	"github.com/kindtest/kindtest/kindtest"
)

// logRecorder keeps the cluster's log lines, so that tests can see what
// the library reported, and passes them on to the test's log.
type logRecorder struct {
	t     testing.TB
	mu    sync.Mutex
	lines []string
}

func (r *logRecorder) Printf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.lines = append(r.lines, line)
	r.mu.Unlock()
	r.t.Logf("%s", line)
}

// mark is where the lines logged from now on start.
func (r *logRecorder) mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.lines)
}

// since returns the lines logged since mark that contain every one of subs.
func (r *logRecorder) since(mark int, subs ...string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
next:
	for _, l := range r.lines[mark:] {
		for _, s := range subs {
			if !strings.Contains(l, s) {
				continue next
			}
		}
		out = append(out, l)
	}
	return out
}

// httpGet GETs url with a client of its own, without keep-alive.
func httpGet(ctx context.Context, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return string(body), fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(body), nil
}

// hasImage reports whether node n's containerd has ref.
func hasImage(ctx context.Context, t *testing.T, n *kindtest.Node, ref string) bool {
	t.Helper()
	res, err := n.Exec(ctx, "ctr", "-n", "k8s.io", "images", "ls", "-q", "name=="+ref)
	if err != nil {
		t.Fatalf("%s: list images: %v", n.Name(), err)
	}
	return strings.TrimSpace(res.Stdout) == ref
}

// TestAccess shares one cluster (a control plane and a worker, node port
// 30080 mapped to the host) between the ways a test reaches into it:
// images loaded into chosen nodes or from a file, waits, port forwarding,
// the port mapping and namespaces per test.
func TestAccess(t *testing.T) {
	dc := engine(t)
	echo, err := fixture.BuildEcho(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := fixture.Manifest("echo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rec := &logRecorder{t: t}
	c := start(t, dc, kindtest.WithWorkers(1), kindtest.WithPortMapping(0, 30080), kindtest.WithLogger(rec))
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cp, worker := c.ControlPlane(), c.Workers()[0]
	echoRef := dockerRef(echo)

	t.Run("load image on chosen nodes", func(t *testing.T) {
		if err := c.LoadImageOn(ctx, []*kindtest.Node{worker}, echo); err != nil {
			t.Fatal(err)
		}
		if !hasImage(ctx, t, worker, echoRef) || hasImage(ctx, t, cp, echoRef) {
			t.Fatalf("after LoadImageOn(worker): want the image on %s only", worker.Name())
		}
		mark := rec.mark()
		if err := c.LoadImage(ctx, echo); err != nil {
			t.Fatal(err)
		}
		if !hasImage(ctx, t, cp, echoRef) {
			t.Fatalf("after LoadImage: no image on %s", cp.Name())
		}
		if got := rec.since(mark, "loaded "+echo+" into "+cp.Name()+" in ", "("+worker.Name()+" had it already)"); len(got) != 1 {
			t.Errorf("LoadImage must import into %s only and say that %s had it: logged %q", cp.Name(), worker.Name(), rec.since(mark))
		}
		// Loaded again: nothing is imported. The time is logged.
		var times []string
		for range 5 {
			mark = rec.mark()
			if err := c.LoadImage(ctx, echo); err != nil {
				t.Fatal(err)
			}
			got := rec.since(mark, echo+" already on "+cp.Name()+", "+worker.Name()+": nothing imported")
			if len(got) != 1 || len(rec.since(mark, "loaded ")) != 0 {
				t.Fatalf("second LoadImage must import nothing: logged %q", rec.since(mark))
			}
			times = append(times, got[0][strings.LastIndex(got[0], "("):])
		}
		t.Logf("LoadImage of an image every node has: %s", strings.Join(times, " "))
	})

	t.Run("load image archive", func(t *testing.T) {
		ref := fmt.Sprintf("kindtest/archive-%d:v1", time.Now().UnixNano())
		path := filepath.Join(t.TempDir(), "images.tar")
		if err := os.WriteFile(path, ociArchive(t, ref, buildHello(t), []string{runtime.GOARCH}, false), 0o644); err != nil {
			t.Fatal(err)
		}
		mark := rec.mark()
		if err := c.LoadImageArchive(ctx, path); err != nil {
			t.Fatal(err)
		}
		for _, n := range c.Nodes() {
			if !hasImage(ctx, t, n, "docker.io/"+ref) {
				t.Errorf("%s: %s not loaded from the archive", n.Name(), ref)
			}
		}
		if len(rec.since(mark, "loaded "+path+" into "+cp.Name()+", "+worker.Name())) != 1 {
			t.Errorf("logged %q", rec.since(mark))
		}
		mark = rec.mark()
		if err := c.LoadImageArchive(ctx, path); err != nil {
			t.Fatal(err)
		}
		if len(rec.since(mark, "nothing imported")) != 1 {
			t.Errorf("second LoadImageArchive must import nothing: logged %q", rec.since(mark))
		}
		err := c.LoadImageArchive(ctx, filepath.Join(t.TempDir(), "missing.tar"))
		if err == nil || !strings.Contains(err.Error(), "no such file") {
			t.Errorf("missing archive: %v", err)
		}
	})

	t.Run("port forward and mapping", func(t *testing.T) {
		ns := c.Namespace(t)
		if _, err := c.KubectlInput(ctx, strings.NewReader(string(manifest)), "apply", "-n", ns, "-f", "-"); err != nil {
			t.Fatal(err)
		}
		if err := c.Wait(ctx, ns, "deployment/echo", kindtest.Available); err != nil {
			t.Fatal(err)
		}
		res, err := c.Kubectl(ctx, "get", "pods", "-n", ns, "-l", "app=echo", "-o", "jsonpath={.items[*].metadata.name}")
		if err != nil {
			t.Fatal(err)
		}
		pods := strings.Fields(res.Stdout)
		if len(pods) != 3 {
			t.Fatalf("echo pods: %q", res.Stdout)
		}
		sort.Strings(pods)
		if err := c.Wait(ctx, ns, "pod/"+pods[0], kindtest.Ready); err != nil {
			t.Fatal(err)
		}

		for _, tc := range []struct {
			target string
			port   int
			want   string
		}{
			{"svc/echo", 80, "path=/pf"},
			{"service/echo", 80, "path=/pf"},
			{"pod/" + pods[1], 8080, "pod=" + pods[1] + " "},
			{"deployment/echo", 8080, "pod=" + pods[0] + " "},
		} {
			addr, stop, err := c.PortForward(ctx, ns, tc.target, tc.port)
			if err != nil {
				t.Errorf("%s: %v", tc.target, err)
				continue
			}
			// Several connections at once, each its own relay.
			var wg sync.WaitGroup
			errs := make([]error, 8)
			for i := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					body, err := httpGet(ctx, "http://"+addr+"/pf")
					if err == nil && !strings.Contains(body, tc.want) {
						err = fmt.Errorf("body %q, want %q", body, tc.want)
					}
					errs[i] = err
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Errorf("%s port %d through %s: %v", tc.target, tc.port, addr, err)
			}
			stop()
			if conn, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
				conn.Close()
				t.Errorf("%s: %s still accepts connections after stop", tc.target, addr)
			}
		}

		t.Run("ends with ctx", func(t *testing.T) {
			fctx, fcancel := context.WithCancel(ctx)
			addr, stop, err := c.PortForward(fctx, ns, "svc/echo", 80)
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			// An idle connection is open when ctx ends: it is closed too.
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fcancel()
			_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			if n, err := conn.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("open connection after ctx ended: read %d, %v; want it closed", n, err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				conn, err := net.DialTimeout("tcp", addr, time.Second)
				if err != nil {
					break
				}
				conn.Close()
				if time.Now().After(deadline) {
					t.Fatalf("%s still accepts connections 30 s after ctx ended", addr)
				}
				time.Sleep(50 * time.Millisecond)
			}
		})

		t.Run("bad targets", func(t *testing.T) {
			for _, tc := range []struct {
				target string
				port   int
				want   []string
			}{
				{"pod/missing", 8080, []string{"pod missing not found in namespace " + ns}},
				{"svc/missing", 80, []string{"service missing not found"}},
				{"deployment/missing", 80, []string{"deployment missing not found"}},
				{"svc/echo", 81, []string{"service echo has no TCP port 81 (its ports: 80/TCP)"}},
				{"pod/" + pods[0], 9999, []string{"nothing accepts connections at ", ":9999", "Connection refused"}},
			} {
				_, stop, err := c.PortForward(ctx, ns, tc.target, tc.port)
				if err == nil {
					stop()
					t.Errorf("%s port %d: no error", tc.target, tc.port)
					continue
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s port %d: error %q does not say %q", tc.target, tc.port, err, w)
					}
				}
			}
		})

		t.Run("mapped node port", func(t *testing.T) {
			addr, err := c.MappedAddr(30080)
			if err != nil {
				t.Fatal(err)
			}
			var body string
			// kube-proxy programs the NodePort a moment after the rollout.
			err = retry(ctx, func() (err error) {
				body, err = httpGet(ctx, "http://"+addr+"/np")
				return err
			})
			if err != nil || !strings.Contains(body, "path=/np") {
				t.Errorf("NodePort 30080 through %s: %q %v", addr, body, err)
			}
			if _, err := c.MappedAddr(30081); err == nil {
				t.Error("MappedAddr of a port not mapped: no error")
			}
		})

		t.Run("connection refused after start", func(t *testing.T) {
			addr, stop, err := c.PortForward(ctx, ns, "svc/echo", 80)
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			if _, err := c.Kubectl(ctx, "scale", "-n", ns, "deployment/echo", "--replicas=0"); err != nil {
				t.Fatal(err)
			}
			for _, p := range pods {
				if err := c.Wait(ctx, ns, "pod/"+p, kindtest.Deleted); err != nil {
					t.Fatal(err)
				}
			}
			// The Service has no endpoint left: kube-proxy rejects
			// connections to it, once its rules catch up.
			mark := rec.mark()
			var body string
			err = retry(ctx, func() error {
				body, err = httpGet(ctx, "http://"+addr+"/gone")
				if err == nil {
					return errors.New("answered")
				}
				if len(rec.since(mark, "failed: socat in "+cp.Name()+" exited")) == 0 {
					return fmt.Errorf("client saw %v; nothing logged yet", err)
				}
				return nil
			})
			if err != nil {
				t.Fatalf("a connection to a Service without endpoints: %v (body %q)", err, body)
			}
			t.Logf("logged: %q", rec.since(mark, "failed: socat"))
			// A new forward to it is refused up front.
			if _, stop, err := c.PortForward(ctx, ns, "svc/echo", 80); err == nil || !strings.Contains(err.Error(), "service echo has no ready endpoint") {
				if err == nil {
					stop()
				}
				t.Errorf("PortForward to a Service without endpoints: %v", err)
			}
		})
	})

	t.Run("wait", func(t *testing.T) {
		ns := c.Namespace(t)
		apply := func(yaml string) {
			t.Helper()
			if _, err := c.KubectlInput(ctx, strings.NewReader(yaml), "apply", "-n", ns, "-f", "-"); err != nil {
				t.Fatal(err)
			}
		}
		apply(`apiVersion: batch/v1
kind: Job
metadata: {name: ok}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: c, image: kindtest/echo:dev, imagePullPolicy: Never, args: [lookup, kubernetes.default.svc.cluster.local]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: fail}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - {name: c, image: kindtest/echo:dev, imagePullPolicy: Never, args: [get, "http://127.0.0.1:1/"]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: broken}
spec:
  replicas: 1
  selector: {matchLabels: {app: broken}}
  template:
    metadata: {labels: {app: broken}}
    spec:
      containers:
      - {name: c, image: "kindtest/missing:none", imagePullPolicy: Never}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: doomed}
data: {a: b}
`)
		if err := c.Wait(ctx, ns, "job/ok", kindtest.Complete); err != nil {
			t.Errorf("job/ok: %v", err)
		}
		wctx, wcancel := context.WithTimeout(ctx, 3*time.Minute)
		err := c.Wait(wctx, ns, "job/fail", kindtest.Complete)
		wcancel()
		if err == nil || !strings.Contains(err.Error(), "job/fail failed") {
			t.Errorf("job/fail: %v, want it to say the job failed", err)
		}
		wctx, wcancel = context.WithTimeout(ctx, 15*time.Second)
		err = c.Wait(wctx, ns, "deployment/broken", kindtest.Available)
		wcancel()
		var we *kindtest.WaitError
		if !errors.As(err, &we) {
			t.Fatalf("deployment/broken: %v, want a *WaitError", err)
		}
		for _, w := range []string{"Conditions:", "Available", "ErrImageNeverPull", "last events in namespace " + ns} {
			if !strings.Contains(we.Diagnostics, w) {
				t.Errorf("the diagnostics of a failed wait do not say %q:\n%s", w, we.Diagnostics)
			}
		}
		if len(we.Diagnostics) > 9<<10 {
			t.Errorf("diagnostics of %d bytes: want them capped", len(we.Diagnostics))
		}
		t.Logf("a failed wait reads:\n%v", err)
		if _, err := c.Kubectl(ctx, "delete", "-n", ns, "configmap/doomed", "--wait=false"); err != nil {
			t.Fatal(err)
		}
		for _, obj := range []string{"configmap/doomed", "configmap/never-was"} {
			if err := c.Wait(ctx, ns, obj, kindtest.Deleted); err != nil {
				t.Errorf("%s: %v", obj, err)
			}
		}
		if err := c.Wait(ctx, "", "node/"+worker.Name(), kindtest.Ready); err != nil {
			t.Errorf("node Ready: %v", err)
		}
	})

	t.Run("namespaces", func(t *testing.T) {
		var mu sync.Mutex
		var made []string
		t.Run("parallel", func(t *testing.T) {
			for i := range 10 {
				t.Run(fmt.Sprint(i), func(t *testing.T) {
					t.Parallel()
					ns := c.Namespace(t)
					mu.Lock()
					made = append(made, ns)
					mu.Unlock()
					// Ten namespaces made at once keep the controller-manager
					// busy: Namespace returns only once a pod can use the
					// namespace's default ServiceAccount.
					if res, err := c.Kubectl(ctx, "get", "serviceaccount", "default", "-n", ns, "-o", "name"); err != nil || strings.TrimSpace(res.Stdout) != "serviceaccount/default" {
						t.Errorf("default ServiceAccount of %s right after Namespace: %q %v", ns, res.Stdout, err)
					}
					yaml := fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: data}
data: {test: %q}
---
apiVersion: v1
kind: Pod
metadata: {name: echo}
spec:
  containers:
  - {name: echo, image: kindtest/echo:dev, imagePullPolicy: Never, args: [serve]}
`, t.Name())
					if _, err := c.KubectlInput(ctx, strings.NewReader(yaml), "apply", "-n", ns, "-f", "-"); err != nil {
						t.Fatal(err)
					}
					res, err := c.Kubectl(ctx, "get", "configmap", "data", "-n", ns, "-o", "jsonpath={.data.test}")
					if err != nil || res.Stdout != t.Name() {
						t.Errorf("configmap in %s: %q %v", ns, res.Stdout, err)
					}
				})
			}
		})
		// Every subtest's cleanup has run: their namespaces are gone, and
		// so are those of the subtests before.
		if len(made) != 10 {
			t.Fatalf("%d namespaces made, want 10", len(made))
		}
		res, err := c.Kubectl(ctx, "get", "namespaces", "-l", kindtest.NamespaceLabelCluster+"="+c.Name(), "-o", "name")
		if err != nil || strings.TrimSpace(res.Stdout) != "" {
			t.Errorf("namespaces left: %q %v", res.Stdout, err)
		}
		res, err = c.Kubectl(ctx, "get", "namespaces", "-o", "name")
		if err != nil {
			t.Fatal(err)
		}
		for _, ns := range made {
			if strings.Contains(res.Stdout, "namespace/"+ns+"\n") {
				t.Errorf("namespace %s left", ns)
			}
		}
	})

	t.Run("crds", func(t *testing.T) {
		dir := filepath.Join(fixture.Dir(), "crds")
		if err := c.InstallCRDs(ctx, dir); err != nil {
			t.Fatal(err)
		}
		// Served at once, in both of Widget's versions.
		ns := c.Namespace(t)
		objs := `apiVersion: example.kindtest.dev/v1
kind: Widget
metadata: {name: new}
spec: {size: 2}
---
apiVersion: example.kindtest.dev/v1alpha1
kind: Widget
metadata: {name: old}
spec: {size: 1}
---
apiVersion: example.kindtest.dev/v1
kind: Gadget
metadata: {name: g-` + ns + `}
spec: {anything: [1, 2]}
`
		if _, err := c.KubectlInput(ctx, strings.NewReader(objs), "create", "-n", ns, "-f", "-"); err != nil {
			t.Fatalf("custom resources right after InstallCRDs: %v", err)
		}
		if _, err := c.Kubectl(ctx, "delete", "gadget", "g-"+ns); err != nil {
			t.Error(err)
		}
		// The CRD's schema is in force: size must be at least 1.
		if _, err := c.KubectlInput(ctx, strings.NewReader("apiVersion: example.kindtest.dev/v1\nkind: Widget\nmetadata: {name: bad}\nspec: {size: 0}\n"), "create", "-n", ns, "-f", "-"); err == nil {
			t.Error("a Widget with size 0 was accepted: the CRD's schema is not the fixture's")
		}
		// Installed again, as a second suite of the same cluster would.
		if err := c.InstallCRDs(ctx, filepath.Join(dir, "widgets.yaml")); err != nil {
			t.Errorf("InstallCRDs again: %v", err)
		}
		// A CRD whose kind another CRD of its group has is never
		// Established: the error names it and its conditions.
		clash := filepath.Join(t.TempDir(), "clash.yaml")
		body := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: clashes.example.kindtest.dev}
spec:
  group: example.kindtest.dev
  scope: Namespaced
  names: {plural: clashes, kind: Widget, listKind: WidgetList}
  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]
`
		if err := os.WriteFile(clash, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		err := c.InstallCRDs(short, clash)
		for _, want := range []string{"kindtest: cluster " + c.Name(), "clash.yaml", "clashes.example.kindtest.dev", "not Established", "NamesAccepted=False"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("InstallCRDs of a CRD whose kind is taken: %v, want it to say %q", err, want)
			}
		}
		if _, err := c.Kubectl(ctx, "delete", "crd", "clashes.example.kindtest.dev", "gadgets.example.kindtest.dev"); err != nil {
			t.Error(err)
		}
	})

	t.Run("after delete", func(t *testing.T) {
		if err := c.Delete(ctx); err != nil {
			t.Fatal(err)
		}
		f := &fatalRecorder{name: t.Name()}
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.Namespace(f)
		}()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("Namespace after the cluster was deleted still runs after a minute")
		}
		if !strings.Contains(f.msg, "was deleted") {
			t.Errorf("Namespace after delete: Fatalf(%q), want it to say the cluster was deleted", f.msg)
		}
		if _, _, err := c.PortForward(ctx, "default", "svc/kubernetes", 443); err == nil || !strings.Contains(err.Error(), "was deleted") {
			t.Errorf("PortForward after delete: %v", err)
		}
		if err := c.Wait(ctx, "default", "pod/x", kindtest.Ready); err == nil || !strings.Contains(err.Error(), "was deleted") {
			t.Errorf("Wait after delete: %v", err)
		}
	})
}

// fatalRecorder is a kindtest.TB whose Fatalf records its message and
// ends the goroutine, as testing's does.
type fatalRecorder struct {
	name string
	msg  string
}

func (f *fatalRecorder) Helper()              {}
func (f *fatalRecorder) Cleanup(func())       {}
func (f *fatalRecorder) Logf(string, ...any)  {}
func (f *fatalRecorder) Skipf(string, ...any) { runtime.Goexit() }
func (f *fatalRecorder) Failed() bool         { return f.msg != "" }
func (f *fatalRecorder) TempDir() string      { return os.TempDir() }
func (f *fatalRecorder) Name() string         { return f.name }
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// BenchmarkPortForward measures a PortForward's cost per HTTP GET to the
// echo Service: over a new connection each time (a Docker exec and socat
// per connection), and over one kept-alive connection.
func BenchmarkPortForward(b *testing.B) {
	dc := enginetest.Client(b)
	ctx := context.Background()
	echo, err := fixture.BuildEcho(ctx)
	if err != nil {
		b.Fatal(err)
	}
	manifest, err := fixture.Manifest("echo.yaml")
	if err != nil {
		b.Fatal(err)
	}
	img := kindtest.Image()
	if _, err := dc.InspectImage(ctx, img); err != nil {
		b.Fatalf("node image %s: %v", img, err)
	}
	c := kindtest.Start(b, kindtest.WithImage(img))
	if err := c.LoadImage(ctx, echo); err != nil {
		b.Fatal(err)
	}
	if err := c.Apply(ctx, manifest); err != nil {
		b.Fatal(err)
	}
	if err := c.Wait(ctx, "default", "deployment/echo", kindtest.Available); err != nil {
		b.Fatal(err)
	}
	addr, stop, err := c.PortForward(ctx, "default", "svc/echo", 80)
	if err != nil {
		b.Fatal(err)
	}
	defer stop()
	for _, keepAlive := range []bool{false, true} {
		name := "new-connection"
		if keepAlive {
			name = "keep-alive"
		}
		b.Run(name, func(b *testing.B) {
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: !keepAlive}}
			defer client.CloseIdleConnections()
			for b.Loop() {
				resp, err := client.Get("http://" + addr + "/bench")
				if err != nil {
					b.Fatal(err)
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("%s %v", resp.Status, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
		})
	}
}

// BenchmarkLoadImageAgain measures a LoadImage of an image every node has
// already (two nodes): one `ctr images ls` exec per node, nothing
// imported. BenchmarkExec/true is the floor: one exec of `true`.
func BenchmarkLoadImageAgain(b *testing.B) {
	dc := enginetest.Client(b)
	ctx := context.Background()
	echo, err := fixture.BuildEcho(ctx)
	if err != nil {
		b.Fatal(err)
	}
	img := kindtest.Image()
	if _, err := dc.InspectImage(ctx, img); err != nil {
		b.Fatalf("node image %s: %v", img, err)
	}
	rec := &logRecorder{t: b}
	c := kindtest.Start(b, kindtest.WithImage(img), kindtest.WithoutKubernetes(), kindtest.WithWorkers(1), kindtest.WithLogger(rec))
	if err := c.LoadImage(ctx, echo); err != nil {
		b.Fatal(err)
	}
	b.Run("LoadImage", func(b *testing.B) {
		for b.Loop() {
			mark := rec.mark()
			if err := c.LoadImage(ctx, echo); err != nil {
				b.Fatal(err)
			}
			if len(rec.since(mark, "nothing imported")) != 1 {
				b.Fatalf("imported again: %q", rec.since(mark))
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
	})
	b.Run("Exec/true", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.ControlPlane().Exec(ctx, "true"); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
	})
}
