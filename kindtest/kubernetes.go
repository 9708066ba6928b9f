// The kubeadm steps of creation: the control plane's files before boot,
// kubeadm init with the add-ons beside it, and kubeadm join.

package kindtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kindtest/kindtest/internal/bootstrap"
	"github.com/kindtest/kindtest/internal/concurrent"
	"github.com/kindtest/kindtest/internal/poll"
)

// kubeadmJoin joins node n, in one exec (see bootstrap.KubeadmJoin): it
// writes kubeadm's configuration and the discovery kubeconfig, which
// names the API server (through the load balancer with several control
// planes) and the CA of the admin kubeconfig, and runs kubeadm join.
func (c *Cluster) kubeadmJoin(ctx context.Context, cr *creation, n *Node) error {
	f, err := kubeconfigFields(c.kubeconfig)
	if err != nil {
		return fmt.Errorf("admin kubeconfig: %w", err)
	}
	server := "https://" + net.JoinHostPort(c.apiHost(), strconv.Itoa(apiServerPort))
	j := bootstrap.KubeadmJoin{
		Config: kubeadmConfigPath,
		Log:    "/etc/kindtest/kubeadm-join.log",
		Files: []bootstrap.File{
			{Path: kubeadmConfigPath, Content: kubeadmJoinConfig(n, cr.kubernetesVersion, cr.token, c.cfg.createTimeout, &c.cfg.settings)},
			{Path: discoveryKubeconfigPath, Content: bootstrap.DiscoveryKubeconfig(server, f["certificate-authority-data"])},
		},
	}
	if n.role == RoleControlPlane {
		// kubeadm join makes its static pods from the cluster's
		// configuration, which names the serving certificates.
		serving, err := servingFiles()
		if err != nil {
			return err
		}
		// Its kubeadm patches put them in one containerd shim.
		j.Files = append(append(j.Files, serving...), bootstrap.ShimGroupPatches()...)
	}
	if _, err := n.ExecInput(ctx, strings.NewReader(j.Input()), j.Command()...); err != nil {
		return &NodeError{Node: n.name, Step: "kubeadm join", Err: err, Diagnostics: c.kubeletDiagnostics(n)}
	}
	return nil
}

// kubeadmInit runs the rest of kubeadm init on the control plane and,
// beside it, creates the kube-proxy and CoreDNS add-ons as soon as the API
// server takes them (see createAddons), without waiting for kubeadm's
// later phases (its API client is rate-limited to 5 requests a second).
func (c *Cluster) kubeadmInit(ctx context.Context, cr *creation, cp *Node) error {
	g, ctx := concurrent.WithContext(ctx)
	g.Go(func() error { return c.createAddons(ctx, cr, cp) })
	g.Go(func() error {
		cmd := bootstrap.KubeadmInitCommand(bootstrap.KubeadmInit{
			Config:        kubeadmConfigPath,
			Log:           "/etc/kindtest/kubeadm-init.log",
			APIServerPort: apiServerPort,
			Wrapper:       strings.Fields(c.cfg.initWrapper),
		})
		if _, err := cp.run(ctx, cmd...); err != nil {
			return &NodeError{Node: cp.name, Step: "kubeadm init", Err: err, Diagnostics: c.kubeletDiagnostics(cp)}
		}
		return nil
	})
	return g.Wait()
}

// createAddons creates the add-on objects from the host, in order, each
// retried until the API server takes it. It uses the super-admin's
// credentials (group system:masters, which RBAC does not check), so it
// waits neither for the API server's readiness (its RBAC bootstrap hooks)
// nor for kubeadm to bind the admin's group: the objects go in as soon as
// the API server serves. Starting kubectl in the node for them took a
// second or two of a busy machine's CPU, and waiting for /readyz as long.
func (c *Cluster) createAddons(ctx context.Context, cr *creation, cp *Node) error {
	start := time.Now()
	kc, err := c.hostKubeconfig(ctx, cp, superAdminKubeconfig, "super-admin", cr.prebootFiles)
	if err != nil {
		return err
	}
	api, err := newAPIClient(kc)
	if err != nil {
		return fmt.Errorf("add-ons: %w", err)
	}
	defer api.close()
	for _, o := range cr.addons {
		var last error
		var refused time.Time
		err := poll.Until(ctx, 20*time.Millisecond, 100*time.Millisecond, func() (bool, error) {
			last = api.do(ctx, http.MethodPost, o.Path, json.RawMessage(o.Body), nil)
			switch {
			case last == nil, isStatus(last, http.StatusConflict):
				return true, nil
			case isStatus(last, http.StatusBadRequest), isStatus(last, http.StatusUnprocessableEntity):
				// A starting API server refuses some objects for a moment
				// (kube-dns's cluster IP before its Service range is
				// set up: "the provided network does not match the
				// current range"); refused for a tenth of the create
				// timeout (30 s by default; longer on a slow machine
				// given more time), the object itself is wrong.
				if refused.IsZero() {
					refused = time.Now()
				}
				if time.Since(refused) > c.cfg.createTimeout/10 {
					return false, last
				}
			}
			return false, nil // not serving yet, or still starting
		})
		if err != nil {
			return fmt.Errorf("create add-on %s %s: %w (last answer: %v)", o.Kind, o.Name, err, last)
		}
	}
	c.log.Printf("kindtest: %s: add-ons created after %v", c.name, time.Since(start).Round(time.Millisecond))
	return nil
}

// initParams are the values of cp's kubeadm init configuration.
func (c *Cluster) initParams(cr *creation, cp *Node) initParams {
	p := initParams{
		cluster: c.name, version: cr.kubernetesVersion, cp: cp, endpoint: c.lbIP, token: cr.token,
		singleNode: c.cfg.workers == 0, timeout: c.cfg.createTimeout, settings: &c.cfg.settings,
		extraSANs:     append(c.place.certSANs(), c.lbSANs()...),
		kubeProxyMode: c.cfg.proxyMode(),
		rootless:      cr.rootless,
		podSubnet:     c.cfg.podSubnet(),
		serviceSubnet: c.cfg.serviceSubnet(),
	}
	if c.cfg.noDefaultCNI {
		p.podRanges = podRangesAllocated
	}
	return p
}

// prepareControlPlane writes the control plane's kubeadm configuration
// and the late add-ons' manifests, and runs the init phases that need no
// running system, before boot, in one exec (see bootstrap.Preboot), which
// also prints kubeadm's kube-proxy and CoreDNS manifests (kindtest
// creates those add-ons itself, CoreDNS's fitted to a test cluster) and
// the admin's and super-admin's kubeconfigs.
func (c *Cluster) prepareControlPlane(ctx context.Context, cr *creation, cp *Node) error {
	if err := c.checkFeatureGatesOnNode(ctx, cr, cp); err != nil {
		return err
	}
	cr.token = newBootstrapToken()
	params := c.initParams(cr, cp)
	addonParams := params
	// The static pods share one containerd shim (see
	// bootstrap.ShimGroupPatches).
	params.patchesDir = bootstrap.KubeadmPatchesDir
	p := bootstrap.Preboot{
		Config:      kubeadmConfigPath,
		AddonConfig: kubeadmAddonConfigPath,
		Log:         prebootLog,
		Files: []bootstrap.File{
			{Path: kubeadmConfigPath, Content: kubeadmInitConfig(params)},
			{Path: kubeadmAddonConfigPath, Content: kubeadmInitConfig(addonParams)},
		},
		Addons: []string{"coredns"},
		Print:  []string{adminKubeconfig, superAdminKubeconfig},
	}
	// The controller-manager's and the scheduler's serving certificates
	// (see servingCertDir).
	serving, err := servingFiles()
	if err != nil {
		return err
	}
	p.Files = append(append(p.Files, serving...), bootstrap.ShimGroupPatches()...)
	if !c.cfg.withoutStorage {
		p.Files = append(p.Files, bootstrap.File{Path: storageManifestPath, Content: storageManifest(c.apiHost(), apiServerPort)})
	}
	if c.cfg.networkPolicyEnforced() {
		p.Files = append(p.Files, bootstrap.File{Path: networkPolicyManifestPath, Content: networkPolicyManifest(c.apiHost(), apiServerPort)})
	}
	if c.cfg.proxyMode() != KubeProxyNone {
		p.Addons = append(p.Addons, "kube-proxy")
	}
	// kubelet-start cannot restart the kubelet before systemd runs, and
	// says so; systemd starts it configured at boot.
	res, err := cp.ExecInput(ctx, strings.NewReader(p.Input()), p.Command()...)
	if err != nil {
		return &NodeError{Node: cp.name, Step: "kubeadm init phases before boot", Err: err}
	}
	parts, err := p.Parse(res.Stdout)
	if err != nil {
		return &NodeError{Node: cp.name, Step: "kubeadm init phases before boot", Err: err}
	}
	cr.prebootFiles = map[string]string{adminKubeconfig: parts[adminKubeconfig], superAdminKubeconfig: parts[superAdminKubeconfig]}
	dns, err := bootstrap.FitCoreDNS(parts["coredns"], min(len(c.nodes), 2), c.apiHost(), apiServerPort)
	if err != nil {
		return &NodeError{Node: cp.name, Step: "fit CoreDNS manifests", Err: err}
	}
	ca, err := kubeconfigCA([]byte(parts[superAdminKubeconfig]))
	if err != nil {
		return &NodeError{Node: cp.name, Step: "read the cluster CA", Err: err}
	}
	addons := bootstrap.RootCAConfigMap(string(ca)) + "---\n" + dns
	if proxy, ok := parts["kube-proxy"]; ok {
		addons = proxy + "\n---\n" + addons
	}
	// kube-proxy's and CoreDNS's pods share the static pods' containerd
	// shim.
	if addons, err = bootstrap.GroupShims(addons); err != nil {
		return &NodeError{Node: cp.name, Step: "read add-on manifests", Err: err}
	}
	if cr.addons, err = bootstrap.Objects(addons); err != nil {
		return &NodeError{Node: cp.name, Step: "read add-on manifests", Err: err}
	}
	return nil
}

// checkFeatureGatesOnNode has the node's kubelet check the feature gates
// when the node image's Kubernetes is not the version whose gates kindtest
// knows: a gate that version does not know would otherwise surface as a
// kubelet that never starts and a kubeadm init that waits for it until
// the create timeout. All components know the same gates.
func (c *Cluster) checkFeatureGatesOnNode(ctx context.Context, cr *creation, n *Node) error {
	gates := c.cfg.settings.featureGates
	if len(gates) == 0 || cr.kubernetesVersion == featureGatesVersion {
		return nil
	}
	res, err := n.Exec(ctx, gateProbe(gates)...)
	var ee *ExitError
	if err != nil && !errors.As(err, &ee) {
		return c.nodeError(n, "check feature gates", err)
	}
	if err := gateProbeVerdict(res.Stdout + res.Stderr); err != nil {
		return fmt.Errorf("feature gates %s: the node image's Kubernetes %s refuses them (kindtest checks gate names before creating a cluster only for %s): %w",
			joinMap(gates), cr.kubernetesVersion, featureGatesVersion, err)
	}
	return nil
}

// gateProbe is a kubelet command that checks gates and stops: the kubelet
// sets its feature gates, then validates its flags, which a label in the
// kubernetes.io namespace fails, so it exits before doing anything.
func gateProbe(gates map[string]bool) []string {
	return []string{"kubelet", "--feature-gates=" + joinMap(gates), "--node-labels=kubernetes.io/kindtest-gate-probe=x"}
}

// gateProbeVerdict reads gateProbe's output: the gates passed when the
// kubelet went on to refuse the label.
func gateProbeVerdict(out string) error {
	if strings.Contains(out, "kubernetes.io/kindtest-gate-probe") {
		return nil
	}
	for _, l := range strings.Split(out, "\n") {
		if i := strings.Index(l, "feature gate"); i >= 0 {
			return errors.New(strings.Trim(strings.TrimSpace(l[i:]), `"`))
		}
	}
	return fmt.Errorf("the kubelet said: %s", strings.TrimSpace(out))
}
