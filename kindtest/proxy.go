// The test process's proxy settings, passed on to the nodes.

package kindtest

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/kindtest/kindtest/internal/bootstrap"
)

// proxySettings are the HTTP_PROXY, HTTPS_PROXY and NO_PROXY of the test
// process (each read upper case first, as kind does, then lower case),
// which the nodes' containerd and kubelet get as their environment: a
// node image pull, a registry mirror or a pod image pull through a
// corporate proxy works as it does on the host.
type proxySettings struct {
	http, https, no string
}

// proxyFromEnv reads the proxy settings of the test process.
func proxyFromEnv() proxySettings {
	get := func(name string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return getenv(strings.ToLower(name))
	}
	return proxySettings{http: get("HTTP_PROXY"), https: get("HTTPS_PROXY"), no: get("NO_PROXY")}
}

func (p proxySettings) set() bool { return p.http != "" || p.https != "" }

// validate refuses a proxy setting that is not a proxy URL, which
// containerd would otherwise ignore or fail on at the first pull.
func (p proxySettings) validate() []error {
	var errs []error
	for _, v := range []struct{ name, value string }{{"HTTP_PROXY", p.http}, {"HTTPS_PROXY", p.https}} {
		if v.value == "" {
			continue
		}
		u, err := url.Parse(v.value)
		if err != nil || u.Host == "" || !slices.Contains([]string{"http", "https", "socks5"}, u.Scheme) || strings.ContainsAny(v.value, " \t\"\\") {
			errs = append(errs, fmt.Errorf("proxy: %s=%q is not a proxy URL such as http://proxy.example.com:3128 (schemes http, https, socks5): fix it, or unset it for the test", v.name, v.value))
		}
	}
	if strings.ContainsAny(p.no, " \t\"\\") {
		errs = append(errs, fmt.Errorf("proxy: NO_PROXY=%q: a comma-separated list of hosts, domains and ranges, without spaces or quotes", p.no))
	}
	return errs
}

// proxyEnvCommand is the provision step that passes the proxy settings
// to a node's systemd units (the same for every node), nil without a
// proxy. NO_PROXY gets what must
// never go through a proxy: the node itself, every node and sidecar of
// the cluster by name, the pod and Service ranges and the cluster's DNS
// domain; the script adds the node network's subnet.
func (c *Cluster) proxyEnvCommand() []string {
	p := c.cfg.proxy
	if !p.set() {
		return nil
	}
	var no []string
	for _, v := range strings.Split(p.no, ",") {
		if v = strings.TrimSpace(v); v != "" {
			no = append(no, v)
		}
	}
	no = append(no, "localhost", "127.0.0.1", "::1", c.cfg.podSubnet(), c.cfg.serviceSubnet(), ".svc", ".svc.cluster.local", ".cluster.local")
	for _, n := range c.nodes {
		no = append(no, n.name)
	}
	for _, s := range sidecars {
		if s.wanted(c.cfg) {
			no = append(no, s.name(c.name))
		}
	}
	return bootstrap.ProxyEnvCommand(p.http, p.https, strings.Join(no, ","))
}
