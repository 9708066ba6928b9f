// A server in the test process that the cluster reaches: admission
// webhooks, CRD conversion webhooks and aggregated API servers.

package kindtest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// hostServerNamespace holds the Service that leads to a HostServer.
const hostServerNamespace = "default"

// HostServer is an HTTPS server in the test process that the cluster's
// API server, its nodes and its pods reach: for an admission webhook, a
// CRD conversion webhook or an aggregated API server under test, run in
// the test process as envtest runs them, against a real cluster.
//
// Its serving certificate is signed by a CA made for it, which the
// configurations Install writes trust (CABundle). It names the address
// the cluster dials (Addr) and the DNS names of the Service that leads
// to it (Service), so that both a URL and a Service reference work.
//
// Where it listens depends on where the test process runs: on the engine's
// host, at the host's address on the cluster's network (the network's
// gateway); in a container of the engine, at that container's address on
// the cluster's network, which it joined. A test process talking to a
// remote engine, or to an engine in a VM (Docker Desktop, colima), cannot
// be reached from the nodes: ServeHTTPS says so.
type HostServer struct {
	c       *Cluster
	srv     *http.Server
	ip      string
	port    int
	caPEM   []byte
	service string
	probe   string // the path prefix of the readiness probe

	mu        sync.Mutex
	installed []installedObject // what Install applied, removed by Close
	closeOnce sync.Once
	closeErr  error
}

// installedObject is what Install applied: a webhook configuration or an
// APIService, removed by Close, or a CRD whose conversion Close resets.
type installedObject struct {
	resource, name string
	conversion     bool // a CRD converted by the server
}

// ServeHTTPS serves handler over HTTPS on an address the cluster reaches,
// and makes a Service (in namespace default) without a selector whose
// endpoint is that address, for what must name a Service (an APIService,
// or a webhook configured by Service). Close stops the server.
func (c *Cluster) ServeHTTPS(ctx context.Context, handler http.Handler) (*HostServer, error) {
	if handler == nil {
		return nil, fmt.Errorf("kindtest: cluster %s: serve HTTPS: the handler is nil", c.name)
	}
	if err := c.usable("serve HTTPS"); err != nil {
		return nil, fmt.Errorf("kindtest: %w", err)
	}
	s, err := c.serveHTTPS(ctx, handler)
	if err != nil {
		return nil, fmt.Errorf("kindtest: cluster %s: serve HTTPS: %w", c.name, err)
	}
	return s, nil
}

func (c *Cluster) serveHTTPS(ctx context.Context, handler http.Handler) (*HostServer, error) {
	ip, err := c.reachableAddress(ctx)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		if errors.Is(err, syscall.EADDRNOTAVAIL) {
			return nil, fmt.Errorf("the nodes reach the engine's host at %s (the gateway of network %s), but that is not an address of this host: the engine runs in a VM or in another network namespace (Docker Desktop, colima, a rootless engine), from which nothing leads to this process. Run the test process in a container on the engine, which joins the cluster's network: %w", ip, c.name, err)
		}
		return nil, fmt.Errorf("listen on %s: %w", ip, err)
	}
	s := &HostServer{c: c, ip: ip, port: ln.Addr().(*net.TCPAddr).Port}
	s.service = "kindtest-host-" + strconv.Itoa(s.port)
	s.probe = "/kindtest.io/probe/"
	caPEM, cert, err := servingCertificate(ip, s.dnsNames(), 24*time.Hour)
	if err != nil {
		ln.Close()
		return nil, err
	}
	s.caPEM = caPEM
	mux := http.NewServeMux()
	mux.HandleFunc(s.probe, denyProbe)
	mux.Handle("/", handler)
	s.srv = &http.Server{
		Handler:           mux,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 30 * time.Second,
		// A handshake the API server refuses (a CA bundle that is not
		// CABundle) is worth seeing in the test's log.
		ErrorLog: log.New(logLines{c, "kindtest: " + c.name + ": host server: "}, "", 0),
	}
	go func() { _ = s.srv.ServeTLS(ln, "", "") }()
	if err := s.createService(ctx); err != nil {
		_ = s.srv.Close()
		return nil, err
	}
	c.log.Printf("kindtest: %s: serving HTTPS for the cluster at %s (Service %s/%s)", c.name, s.Addr(), hostServerNamespace, s.service)
	return s, nil
}

// reachableAddress is the address of this process that the nodes reach.
func (c *Cluster) reachableAddress(ctx context.Context) (string, error) {
	// An IPv6-only cluster's Services route IPv6 endpoints only.
	v6 := c.cfg.family() == IPv6
	switch c.place.kind {
	case placementRemote:
		return "", fmt.Errorf("this process talks to a remote engine (%s), whose nodes cannot reach it: run the test process in a container on that engine, which joins the cluster's network", c.place.publishIP)
	case placementContainer:
		self, err := c.docker.InspectContainer(ctx, c.place.self.ID)
		if err != nil {
			return "", err
		}
		if ip := self.IPs[c.name]; ip != "" && !v6 {
			return ip, nil
		}
		if ip := self.IPv6s[c.name]; ip != "" && v6 {
			return ip, nil
		}
		return "", fmt.Errorf("this process's container %s has no address on the cluster's network %s", c.place.self.Name, c.name)
	}
	cp, err := c.docker.InspectContainer(ctx, c.ControlPlane().id)
	if err != nil {
		return "", err
	}
	if gw := cp.Gateways[c.name]; gw != "" && !v6 {
		return gw, nil
	}
	if gw := cp.Gateways6[c.name]; gw != "" && v6 {
		return gw, nil
	}
	return "", fmt.Errorf("the engine reports no gateway for network %s of node %s, so no address of this host is known to the nodes", c.name, cp.Name)
}

// Addr is host:port as the cluster dials it.
func (s *HostServer) Addr() string { return net.JoinHostPort(s.ip, strconv.Itoa(s.port)) }

// URL is the URL of path on the server, as the cluster dials it: what a
// webhook's clientConfig.url takes.
func (s *HostServer) URL(path string) string {
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	return "https://" + s.Addr() + path
}

// CABundle is the PEM of the CA that signed the server's certificate: what
// a clientConfig.caBundle or an APIService's caBundle takes.
func (s *HostServer) CABundle() []byte { return append([]byte(nil), s.caPEM...) }

// Service names the Service that leads to the server, on port 443.
func (s *HostServer) Service() (namespace, name string, port int) {
	return hostServerNamespace, s.service, 443
}

// dnsNames are the names a client of the Service checks the certificate
// against.
func (s *HostServer) dnsNames() []string {
	base := s.service + "." + hostServerNamespace
	return []string{s.service, base, base + ".svc", base + ".svc.cluster.local"}
}

// Close stops the server and removes its Service and the webhook
// configurations and APIServices Install applied: the API server would
// otherwise send its calls to a server that is gone. A CRD Install pointed
// at the server keeps its objects, and its conversion becomes None, so
// they stay readable and deletable (a namespace holding one could not be
// deleted otherwise). Close is idempotent.
func (s *HostServer) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		objs := append([]installedObject{{resource: "endpointslices.discovery.k8s.io", name: s.service}, {resource: "services", name: s.service}}, s.installed...)
		s.mu.Unlock()
		if s.c.usable("") == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			for i := len(objs) - 1; i >= 0; i-- {
				o := objs[i]
				args := []string{"delete", o.resource, o.name, "--ignore-not-found", "--wait=false"}
				switch {
				case o.conversion:
					args = []string{"patch", o.resource, o.name, "--type=merge", "-p", `{"spec":{"conversion":{"strategy":"None","webhook":null}}}`}
				case o.resource == "services" || strings.HasPrefix(o.resource, "endpointslices."):
					args = append(args, "-n", hostServerNamespace)
				}
				if _, err := s.c.Kubectl(ctx, args...); err != nil {
					s.closeErr = errors.Join(s.closeErr, err)
				}
			}
		}
		s.closeErr = errors.Join(s.closeErr, s.srv.Close())
		if s.closeErr != nil {
			s.closeErr = fmt.Errorf("kindtest: cluster %s: close the server at %s: %w", s.c.name, s.Addr(), s.closeErr)
		}
	})
	return s.closeErr
}

// createService makes the Service without a selector and the
// EndpointSlice that lead to the server.
func (s *HostServer) createService(ctx context.Context) error {
	labels := map[string]any{"app.kubernetes.io/managed-by": "kindtest"}
	svc := map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": s.service, "namespace": hostServerNamespace, "labels": labels},
		"spec":     map[string]any{"ports": []any{map[string]any{"name": "https", "port": 443, "targetPort": s.port, "protocol": "TCP"}}},
	}
	slice := map[string]any{
		"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
		"metadata": map[string]any{"name": s.service, "namespace": hostServerNamespace, "labels": map[string]any{
			"kubernetes.io/service-name":             s.service,
			"endpointslice.kubernetes.io/managed-by": "kindtest.io",
		}},
		"addressType": familyName(netip.MustParseAddr(s.ip)),
		"endpoints":   []any{map[string]any{"addresses": []any{s.ip}, "conditions": map[string]any{"ready": true}}},
		"ports":       []any{map[string]any{"name": "https", "port": s.port, "protocol": "TCP"}},
	}
	api, err := newAPIClient(s.c.kubeconfig)
	if err != nil {
		return err
	}
	defer api.close()
	if err := api.do(ctx, http.MethodPost, "/api/v1/namespaces/"+hostServerNamespace+"/services", svc, nil); err != nil {
		return fmt.Errorf("create Service %s/%s: %w", hostServerNamespace, s.service, err)
	}
	if err := api.do(ctx, http.MethodPost, "/apis/discovery.k8s.io/v1/namespaces/"+hostServerNamespace+"/endpointslices", slice, nil); err != nil {
		return fmt.Errorf("create EndpointSlice %s/%s: %w", hostServerNamespace, s.service, err)
	}
	return nil
}

// servingCertificate makes a CA and a certificate it signs for ip and
// names, valid from an hour ago for lifetime.
func servingCertificate(ip string, names []string, lifetime time.Duration) (caPEM []byte, cert tls.Certificate, err error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kindtest host server CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(lifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		IPAddresses:  []net.IP{net.ParseIP(ip)},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(lifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	return caPEM, tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// denyProbe answers the readiness probe's AdmissionReview with a denial
// that names itself: once a create of the probe object is denied so, the
// API server calls the webhooks of that configuration.
func denyProbe(w http.ResponseWriter, r *http.Request) {
	var review struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Request    struct {
			UID string `json:"uid"`
		} `json:"request"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&review); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
		"response": map[string]any{
			"uid": review.Request.UID, "allowed": false,
			"status": map[string]any{"code": 403, "message": probeDenial + r.URL.Path},
		},
	})
}

// logLines writes each line to the cluster's Logger while its handle is
// open: Start's logger is its test's, which must not be written to once
// the test has ended, and a server left open may still be called then.
type logLines struct {
	c      *Cluster
	prefix string
}

func (w logLines) Write(p []byte) (int, error) {
	if !w.c.life.closed.Load() {
		w.c.log.Printf("%s%s", w.prefix, strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// probeDenial starts the message of a denied probe.
const probeDenial = "kindtest readiness probe "
