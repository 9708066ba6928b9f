package kindtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kindtest/kindtest/internal/poll"
)

// forwardKinds are the targets PortForward takes, by the names kubectl
// knows them by.
var forwardKinds = map[string]string{
	"pod": "pod", "pods": "pod", "po": "pod",
	"svc": "service", "service": "service", "services": "service",
	"deployment": "deployment", "deployments": "deployment", "deploy": "deployment",
}

// parseTarget splits "kind/name".
func parseTarget(target string) (kind, name string, err error) {
	kind, name, ok := strings.Cut(target, "/")
	if !ok || kind == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("target %q: want KIND/NAME, e.g. pod/web or svc/web", target)
	}
	return strings.ToLower(kind), name, nil
}

// forwardTimeout bounds the resolution of a PortForward target.
const forwardTimeout = 30 * time.Second

// serviceProbePatience is how long PortForward keeps trying a Service
// that has ready endpoints but refuses connections: kube-proxy's rules
// follow the endpoints within seconds.
const serviceProbePatience = 15 * time.Second

// socatLinger is how long a forwarded connection's relay (socat -t) goes
// on in the other direction once one direction has ended.
const socatLinger = "5"

// PortForward forwards connections to 127.0.0.1:PORT in this process to
// remotePort of a workload and returns that address. target is
// "pod/NAME", "svc/NAME" (or "service/NAME": remotePort is then one of the
// Service's ports, reached at its cluster IP through kube-proxy) or
// "deployment/NAME" (its first ready pod, by name). The target is resolved
// once: a missing object, a pod that is not Running, a Service without
// that port or a port where nothing accepts connections is an error
// before anything listens.
//
// Each accepted connection is relayed by socat in the control-plane node,
// through a Docker exec, so it works wherever the engine is (local,
// remote, or this process in a container of the engine). A connection
// that cannot be relayed is closed, and why is logged. When one side has
// ended its half of the stream, the relay waits 5 s at most for the other
// to end.
//
// stop closes the listener and every open connection, and returns once
// none is left; so does the end of ctx. Nothing else needs releasing.
func (c *Cluster) PortForward(ctx context.Context, namespace, target string, remotePort int) (localAddr string, stop func(), err error) {
	if err := c.usable("port-forward"); err != nil {
		return "", nil, err
	}
	kind, name, err := parseTarget(target)
	if err != nil {
		return "", nil, fmt.Errorf("port-forward: %w", err)
	}
	if forwardKinds[kind] == "" {
		return "", nil, fmt.Errorf("port-forward %s: kind %q cannot be forwarded to: use pod/NAME, svc/NAME or deployment/NAME", target, kind)
	}
	if remotePort < 1 || remotePort > 65535 {
		return "", nil, fmt.Errorf("port-forward %s: port %d is out of range 1-65535", target, remotePort)
	}
	if namespace == "" {
		namespace = "default"
	}
	what := fmt.Sprintf("%s in namespace %s, port %d", target, namespace, remotePort)
	rctx, cancel := context.WithTimeout(ctx, forwardTimeout)
	defer cancel()
	ip, err := c.resolveForward(rctx, namespace, forwardKinds[kind], name, remotePort)
	if err != nil {
		return "", nil, fmt.Errorf("port-forward %s: %w", what, err)
	}
	dest := net.JoinHostPort(ip, strconv.Itoa(remotePort))
	// One connection now, so that a closed port is an error here rather
	// than a closed connection later. A Service with ready endpoints
	// gets a moment more: kube-proxy programs them a little after the
	// pods are ready.
	var refused string
	probe := func() (bool, error) {
		res, err := c.ControlPlane().Exec(rctx, "socat", "-u", "-t0", "OPEN:/dev/null", "TCP:"+dest+",connect-timeout=5")
		var ee *ExitError
		if errors.As(err, &ee) {
			refused = lastLine(res.Stderr)
			return false, nil
		}
		return err == nil, err
	}
	patience := time.Duration(0)
	if forwardKinds[kind] == "service" {
		patience = serviceProbePatience
	}
	pctx, pcancel := context.WithTimeout(rctx, patience)
	err = poll.Until(pctx, 100*time.Millisecond, time.Second, probe)
	pcancel()
	if err != nil && refused == "" {
		return "", nil, fmt.Errorf("port-forward %s: %w", what, err)
	}
	if err != nil {
		return "", nil, fmt.Errorf("port-forward %s: nothing accepts connections at %s: %s", what, dest, refused)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("port-forward %s: %w", what, err)
	}
	f := &forwarder{c: c, ln: ln, dest: dest, what: what, conns: map[io.Closer]bool{}}
	f.ctx, f.cancel = context.WithCancel(context.WithoutCancel(ctx))
	f.wg.Add(1)
	go f.serve()
	if ctx.Done() != nil {
		go func() {
			select {
			case <-ctx.Done():
				f.stop()
			case <-f.ctx.Done():
			}
		}()
	}
	c.log.Printf("kindtest: %s: forwarding %s to %s (%s)", c.name, ln.Addr(), what, dest)
	return ln.Addr().String(), f.stop, nil
}

// lastLine is the last non-empty line of s, trimmed.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// resolveForward finds the address to dial for a target: a pod's IP or a
// Service's cluster IP.
func (c *Cluster) resolveForward(ctx context.Context, namespace, kind, name string, port int) (string, error) {
	api, err := newAPIClient(c.kubeconfig)
	if err != nil {
		return "", err
	}
	defer api.close()
	ns := "/namespaces/" + url.PathEscape(namespace)
	switch kind {
	case "service":
		var svc struct {
			Spec struct {
				Type      string `json:"type"`
				ClusterIP string `json:"clusterIP"`
				Ports     []struct {
					Port     int    `json:"port"`
					Protocol string `json:"protocol"`
				} `json:"ports"`
			} `json:"spec"`
		}
		if err := api.get(ctx, "/api/v1"+ns+"/services/"+url.PathEscape(name), &svc); err != nil {
			return "", notFound(err, "service", namespace, name)
		}
		if svc.Spec.Type == "ExternalName" {
			return "", fmt.Errorf("service %s is of type ExternalName: it has no cluster IP to forward to", name)
		}
		if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == "None" {
			return "", fmt.Errorf("service %s is headless (no cluster IP): forward to one of its pods instead", name)
		}
		var have []string
		found := false
		for _, p := range svc.Spec.Ports {
			if p.Port == port && (p.Protocol == "" || p.Protocol == "TCP") {
				found = true
			}
			have = append(have, fmt.Sprintf("%d/%s", p.Port, p.Protocol))
		}
		if !found {
			return "", fmt.Errorf("service %s has no TCP port %d (its ports: %s)", name, port, strings.Join(have, ", "))
		}
		var slices struct {
			Items []struct {
				Endpoints []struct {
					Conditions struct {
						Ready *bool `json:"ready"`
					} `json:"conditions"`
				} `json:"endpoints"`
			} `json:"items"`
		}
		if err := api.get(ctx, "/apis/discovery.k8s.io/v1"+ns+"/endpointslices?labelSelector="+url.QueryEscape("kubernetes.io/service-name="+name), &slices); err != nil {
			return "", err
		}
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready == nil || *e.Conditions.Ready {
					return svc.Spec.ClusterIP, nil
				}
			}
		}
		return "", fmt.Errorf("service %s has no ready endpoint: no ready pod matches its selector (wait for its pods first)", name)
	case "deployment":
		var d struct {
			Spec struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
			} `json:"spec"`
		}
		if err := api.get(ctx, "/apis/apps/v1"+ns+"/deployments/"+url.PathEscape(name), &d); err != nil {
			return "", notFound(err, "deployment", namespace, name)
		}
		var sel []string
		for k, v := range d.Spec.Selector.MatchLabels {
			sel = append(sel, k+"="+v)
		}
		sort.Strings(sel)
		var pods podList
		if err := api.get(ctx, "/api/v1"+ns+"/pods?labelSelector="+url.QueryEscape(strings.Join(sel, ",")), &pods); err != nil {
			return "", err
		}
		sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Metadata.Name < pods.Items[j].Metadata.Name })
		for _, p := range pods.Items {
			if p.Status.Phase == "Running" && p.Status.PodIP != "" && podReady(p.Status.Conditions) {
				return p.Status.PodIP, nil
			}
		}
		return "", fmt.Errorf("deployment %s has no ready pod (of %d): wait for it first, e.g. Wait(ctx, %q, \"deployment/%s\", kindtest.Available)", name, len(pods.Items), namespace, name)
	default:
		var p struct {
			Status struct {
				Phase string `json:"phase"`
				PodIP string `json:"podIP"`
			} `json:"status"`
		}
		if err := api.get(ctx, "/api/v1"+ns+"/pods/"+url.PathEscape(name), &p); err != nil {
			return "", notFound(err, "pod", namespace, name)
		}
		if p.Status.Phase != "Running" || p.Status.PodIP == "" {
			return "", fmt.Errorf("pod %s is %s, not Running: wait for it first, e.g. Wait(ctx, %q, \"pod/%s\", kindtest.Ready)", name, p.Status.Phase, namespace, name)
		}
		return p.Status.PodIP, nil
	}
}

func podReady(conds []condition) bool {
	for _, c := range conds {
		if c.Type == "Ready" && c.Status == "True" {
			return true
		}
	}
	return false
}

// notFound says plainly that an object does not exist.
func notFound(err error, kind, namespace, name string) error {
	if isStatus(err, 404) {
		return fmt.Errorf("%s %s not found in namespace %s", kind, name, namespace)
	}
	return err
}

// forwarder is one PortForward: its listener and the connections it
// relays.
type forwarder struct {
	c      *Cluster
	ln     net.Listener
	dest   string
	what   string
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	mu      sync.Mutex
	conns   map[io.Closer]bool
	stopped bool
}

func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		conn, err := f.ln.Accept()
		if err != nil {
			if f.ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				f.c.log.Printf("kindtest: %s: port-forward %s: accept: %v", f.c.name, f.what, err)
			}
			return
		}
		if !f.track(conn) {
			conn.Close()
			return
		}
		f.wg.Add(1)
		go f.relay(conn)
	}
}

// track records an open connection; false once stopped.
func (f *forwarder) track(cl io.Closer) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return false
	}
	f.conns[cl] = true
	return true
}

func (f *forwarder) untrack(cl io.Closer) {
	f.mu.Lock()
	delete(f.conns, cl)
	f.mu.Unlock()
	cl.Close()
}

// relay joins one accepted connection to socat in the control plane.
func (f *forwarder) relay(conn net.Conn) {
	defer f.wg.Done()
	defer f.untrack(conn)
	cp := f.c.ControlPlane()
	ec, err := f.c.docker.DialExec(f.ctx, cp.id, []string{"socat", "-t" + socatLinger, "STDIO", "TCP:" + f.dest + ",connect-timeout=10"})
	if err != nil {
		if f.ctx.Err() == nil {
			f.c.log.Printf("kindtest: %s: port-forward %s: connection from %s: %v", f.c.name, f.what, conn.RemoteAddr(), err)
		}
		return
	}
	if !f.track(ec) {
		ec.Close()
		return
	}
	defer f.untrack(ec)
	go func() {
		// The client's half-close (or close) is the relay's end of input.
		_, _ = io.Copy(ec, conn)
		_ = ec.CloseWrite()
	}()
	_, _ = io.Copy(conn, ec)
	// socat has ended, or the client is gone: nothing more can go either
	// way. What socat still writes is dropped until it ends.
	conn.Close()
	go func() { _, _ = io.Copy(io.Discard, ec) }()
	wctx, cancel := context.WithTimeout(f.ctx, 10*time.Second)
	defer cancel()
	code, stderr, err := ec.Wait(wctx)
	if f.ctx.Err() != nil {
		return // stopped: connections were cut on purpose
	}
	switch {
	case err != nil:
		f.c.log.Printf("kindtest: %s: port-forward %s: connection from %s: %v", f.c.name, f.what, conn.RemoteAddr(), err)
	case code != 0:
		f.c.log.Printf("kindtest: %s: port-forward %s: connection from %s failed: socat in %s exited %d: %s", f.c.name, f.what, conn.RemoteAddr(), cp.name, code, lastLine(stderr))
	}
}

// stop closes the listener and every connection, then waits for the
// relays to end.
func (f *forwarder) stop() {
	f.once.Do(func() {
		f.mu.Lock()
		f.stopped = true
		open := make([]io.Closer, 0, len(f.conns))
		for cl := range f.conns {
			open = append(open, cl)
		}
		f.mu.Unlock()
		f.cancel()
		f.ln.Close()
		for _, cl := range open {
			cl.Close()
		}
		f.wg.Wait()
	})
}
