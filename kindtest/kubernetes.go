package kindtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/kindtest/kindtest/internal/bootstrap"
	"github.com/kindtest/kindtest/internal/concurrent"
)

// nodeNetworkCommand prepares node n's networking before it boots (see
// bootstrap.NodeNetworkCommand): DNS, and kindtest's pod network unless
// WithoutDefaultCNI, with routes to the other nodes' pod ranges.
func nodeNetworkCommand(c *Cluster, n *Node) []string {
	if c.cfg.noDefaultCNI {
		return bootstrap.NodeNetworkCommand(bootstrap.NodeNetwork{})
	}
	net := bootstrap.NodeNetwork{
		PodSubnet:        nodePodSubnet(n.index),
		ClusterPodSubnet: podSubnet,
		BridgeNetfilter:  c.cfg.networkPolicyEnforced(),
	}
	for _, o := range c.nodes {
		if o != n {
			net.Routes = append(net.Routes, bootstrap.Route{Dst: nodePodSubnet(o.index), Via: o.ip})
		}
	}
	return bootstrap.NodeNetworkCommand(net)
}

// setupKubernetes turns booted nodes into a Kubernetes cluster: kubeadm
// init on the control plane, kubeadm join on the workers in parallel, then
// waits until the cluster is really ready.
//
// kubeadm init starts as soon as the boot signals are sent, while waitBoot
// waits for systemd on every node: init's first step waits for the API
// server anyway. A failed boot cancels init and is the error reported.
func (c *Cluster) setupKubernetes(ctx context.Context, waitBoot func(context.Context) error) error {
	cp := c.ControlPlane()
	ictx, cancel := context.WithCancel(ctx)
	defer cancel()
	var bootErr, initErr error
	concurrent.Each(2, func(i int) error {
		if i == 0 {
			if bootErr = waitBoot(ictx); bootErr != nil {
				cancel()
			}
		} else {
			initErr = c.phase("init", func() error { return c.kubeadmInit(ictx, cp) })
		}
		return nil
	})
	if bootErr != nil {
		return bootErr
	}
	if initErr != nil {
		return initErr
	}
	if err := c.phase("kubeconfig", func() error { return c.fetchKubeconfig(ctx) }); err != nil {
		return err
	}
	if len(c.nodes) > 1 {
		if err := c.phase("join", func() error {
			// kubeadm join retries discovery only every 5 s: start it once
			// the controller-manager has signed cluster-info for the token.
			if err := c.waitClusterInfoSigned(ctx); err != nil {
				return err
			}
			// Workers join side by side; control planes one after the
			// other, beside them: each adds an etcd member, and etcd
			// takes one new member at a time.
			workers, cps := c.Workers(), c.ControlPlanes()[1:]
			return concurrent.Each(len(workers)+1, func(i int) error {
				if i == len(workers) {
					for _, n := range cps {
						if err := c.joinControlPlane(ctx, n); err != nil {
							return err
						}
					}
					return nil
				}
				n := workers[i]
				return c.kubeadm(ctx, n, kubeadmJoinConfig(c.apiHost(), n, c.token, c.cfg.createTimeout, &c.cfg.settings), "join")
			})
		}); err != nil {
			return err
		}
	}
	if c.cfg.noDefaultCNI {
		// The user's CNI makes the nodes Ready; WaitReady waits for it.
		if err := c.phase("api server", func() error { return c.waitAPIServer(ctx) }); err != nil {
			return err
		}
	} else if err := c.phase("ready", func() error { return c.waitReady(ctx) }); err != nil {
		return err
	}
	if c.cfg.withoutStorage && !c.cfg.networkPolicyEnforced() {
		return nil
	}
	return c.phase("late add-ons", func() error { return c.startLateAddons(ctx) })
}

// waitClusterInfoSigned waits until the cluster-info ConfigMap carries the
// bootstrap token's signature, which workers' discovery checks.
func (c *Cluster) waitClusterInfoSigned(ctx context.Context) error {
	api, err := newAPIClient(c.kubeconfig)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", c.name, err)
	}
	defer api.close()
	key := "jws-kubeconfig-" + strings.SplitN(c.token, ".", 2)[0]
	var last error
	err = waitFor(ctx, 20*time.Millisecond, 250*time.Millisecond, func() (bool, error) {
		var cm struct {
			Data map[string]string `json:"data"`
		}
		if last = api.get(ctx, "/api/v1/namespaces/kube-public/configmaps/cluster-info", &cm); last != nil {
			return false, nil
		}
		return cm.Data[key] != "", nil
	})
	if err != nil {
		return fmt.Errorf("cluster %s: cluster-info not signed for the bootstrap token (is the controller-manager running?): %w (last answer: %v)", c.name, err, last)
	}
	return nil
}

// kubeadmInit runs the rest of kubeadm init on the control plane. The
// kube-proxy and CoreDNS manifests are applied as soon as the API server
// lets the admin in, while kubeadm is still busy with its later phases
// (its API client is rate-limited to 5 requests a second).
func (c *Cluster) kubeadmInit(ctx context.Context, cp *Node) error {
	cmd := bootstrap.KubeadmInitCommand(bootstrap.KubeadmInit{
		APIServerPort: apiServerPort,
		Kubeconfig:    adminKubeconfig,
		Addons:        addonsManifest,
		AddonsLog:     addonsLog,
		Config:        kubeadmConfigPath,
		Log:           "/etc/kindtest/kubeadm-init.log",
		Wrapper:       strings.Fields(c.cfg.initWrapper),
	})
	if _, err := cp.run(ctx, cmd...); err != nil {
		return &NodeError{Node: cp.name, Step: "kubeadm init", Err: err, Diagnostics: c.kubeletDiagnostics(cp)}
	}
	return nil
}

// prepareControlPlane writes the control plane's kubeadm configuration
// and runs the init phases that need no running system, before boot.
func (c *Cluster) prepareControlPlane(ctx context.Context, cp *Node) error {
	if err := c.checkFeatureGatesOnNode(ctx, cp); err != nil {
		return err
	}
	c.token = newBootstrapToken()
	if err := c.writeKubeadmConfig(ctx, cp, kubeadmInitConfig(c.name, c.kubernetesVersion, cp, c.lbIP, c.token, c.cfg.workers == 0, c.cfg.createTimeout, &c.cfg.settings, append(c.place.certSANs(), c.lbSANs()...)...)); err != nil {
		return err
	}
	// kindtest applies the kube-proxy and CoreDNS add-ons itself, from
	// kubeadm's own manifests, CoreDNS's fitted to a test cluster. The
	// three kubeadm runs are independent.
	var proxy, dns string
	err := concurrent.Each(3, func(i int) error {
		switch i {
		case 0:
			// kubelet-start cannot restart the kubelet before systemd
			// runs, and says so; systemd starts it configured at boot.
			if _, err := cp.run(ctx, bootstrap.KubeadmPrebootCommand(kubeadmConfigPath, prebootLog)...); err != nil {
				dctx, cancel := detached(ctx, 10*time.Second)
				defer cancel()
				log, _ := cp.run(dctx, "cat", prebootLog)
				return &NodeError{Node: cp.name, Step: "kubeadm init phases before boot", Err: err, Diagnostics: log}
			}
			return nil
		case 1:
			return c.printAddon(ctx, cp, "kube-proxy", &proxy)
		default:
			return c.printAddon(ctx, cp, "coredns", &dns)
		}
	})
	if err != nil {
		return err
	}
	dns, err = bootstrap.FitCoreDNS(dns, min(len(c.nodes), 2), c.apiHost(), apiServerPort)
	if err != nil {
		return &NodeError{Node: cp.name, Step: "fit CoreDNS manifests", Err: err}
	}
	// One exec writes every manifest file, each as many bytes of the
	// input as its content.
	files := []struct{ path, content string }{{addonsManifest, strings.TrimRight(proxy, "\n") + "\n---\n" + dns}}
	if !c.cfg.withoutStorage {
		files = append(files, struct{ path, content string }{storageManifestPath, storageManifest(c.apiHost(), apiServerPort)})
	}
	if c.cfg.networkPolicyEnforced() {
		files = append(files, struct{ path, content string }{networkPolicyManifestPath, networkPolicyManifest(c.apiHost(), apiServerPort)})
	}
	var manifests string
	var writes []string
	for _, f := range files {
		manifests += f.content
		writes = append(writes, fmt.Sprintf("head -c %d > %s", len(f.content), f.path))
	}
	write := strings.Join(writes, " && ")
	if _, err := cp.ExecInput(ctx, strings.NewReader(manifests), "sh", "-c", write); err != nil {
		return c.nodeError(cp, "write add-on manifests", err)
	}
	return nil
}

// checkFeatureGatesOnNode has the node's kubelet check the feature gates
// when the node image's Kubernetes is not the version whose gates kindtest
// knows: a gate that version does not know would otherwise surface as a
// kubelet that never starts and a kubeadm init that waits for it until
// the create timeout. All components know the same gates.
func (c *Cluster) checkFeatureGatesOnNode(ctx context.Context, n *Node) error {
	gates := c.cfg.settings.featureGates
	if len(gates) == 0 || c.kubernetesVersion == featureGatesVersion {
		return nil
	}
	res, err := n.Exec(ctx, gateProbe(gates)...)
	var ee *ExitError
	if err != nil && !errors.As(err, &ee) {
		return c.nodeError(n, "check feature gates", err)
	}
	if err := gateProbeVerdict(res.Stdout + res.Stderr); err != nil {
		return fmt.Errorf("cluster %s: feature gates %s: the node image's Kubernetes %s refuses them (kindtest checks gate names before creating a cluster only for %s): %w",
			c.name, joinMap(gates), c.kubernetesVersion, featureGatesVersion, err)
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

// printAddon has kubeadm print an add-on's manifests into out.
func (c *Cluster) printAddon(ctx context.Context, cp *Node, name string, out *string) error {
	res, err := cp.Exec(ctx, "kubeadm", "init", "phase", "addon", name, "--print-manifest", "--config", kubeadmConfigPath)
	if err != nil {
		return c.nodeError(cp, "print "+name+" manifests", err)
	}
	*out = res.Stdout
	return nil
}

func (c *Cluster) writeKubeadmConfig(ctx context.Context, n *Node, cfg string) error {
	cfg = c.adjustKubeadmConfig(cfg) // WithoutDefaultCNI
	write := "mkdir -p " + filepath.Dir(kubeadmConfigPath) + " && cat > " + kubeadmConfigPath
	if _, err := n.ExecInput(ctx, strings.NewReader(cfg), "sh", "-c", write); err != nil {
		return c.nodeError(n, "write kubeadm config", err)
	}
	return nil
}

// kubeadm runs kubeadm on the node with the configuration cfg, or with the
// one already written when cfg is "".
func (c *Cluster) kubeadm(ctx context.Context, n *Node, cfg string, args ...string) error {
	if cfg != "" {
		if err := c.writeKubeadmConfig(ctx, n, cfg); err != nil {
			return err
		}
	}
	cmd := append([]string{"kubeadm"}, args...)
	cmd = append(cmd, "--config", kubeadmConfigPath)
	res, err := n.Exec(ctx, cmd...)
	// Kept for log export whatever the outcome.
	dctx, cancel := detached(ctx, 10*time.Second)
	defer cancel()
	_, _ = n.ExecInput(dctx, strings.NewReader(res.Stdout+res.Stderr), "sh", "-c", "cat > /etc/kindtest/kubeadm-"+args[0]+".log")
	if err != nil {
		return &NodeError{Node: n.name, Step: "kubeadm " + args[0], Err: err, Diagnostics: c.kubeletDiagnostics(n)}
	}
	return nil
}

// detached returns a context for work that must run although ctx ended
// (recording what failed), bounded by d.
func detached(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}

// kubeletDiagnostics is what a failed kubeadm step needs shown: the
// kubelet's last words and the containers the runtime ran.
func (c *Cluster) kubeletDiagnostics(n *Node) string {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var b strings.Builder
	if out, err := n.sh(ctx, "journalctl -u kubelet --no-pager -n 25 -o cat"); err == nil && out != "" {
		fmt.Fprintf(&b, "kubelet journal on %s (last lines):\n%s", n.name, indent(out))
	}
	if out, err := n.sh(ctx, "ctr -n k8s.io containers ls 2>&1 | tail -n 20"); err == nil && out != "" {
		fmt.Fprintf(&b, "containers on %s:\n%s", n.name, indent(out))
	}
	return strings.TrimRight(b.String(), "\n")
}

// fetchKubeconfig reads the admin kubeconfig from the control plane,
// points it at the API server's published host port and writes it to the
// cluster's work directory.
func (c *Cluster) fetchKubeconfig(ctx context.Context) error {
	cp := c.ControlPlane()
	raw, err := cp.run(ctx, "cat", adminKubeconfig)
	if err != nil {
		return c.nodeError(cp, "read admin kubeconfig", err)
	}
	kc, err := rewriteServer([]byte(raw), c.apiServer)
	if err != nil {
		return fmt.Errorf("cluster %s: admin kubeconfig: %w", c.name, err)
	}
	c.kubeconfig = kc
	if c.workDir == "" {
		dir, err := os.MkdirTemp("", "kindtest-"+c.name+"-")
		if err != nil {
			return fmt.Errorf("cluster %s: %w", c.name, err)
		}
		c.workDir, c.ownsWorkDir = dir, true
	}
	c.kubeconfigPath = filepath.Join(c.workDir, "kubeconfig")
	if err := os.WriteFile(c.kubeconfigPath, kc, 0o600); err != nil {
		return fmt.Errorf("cluster %s: write kubeconfig: %w", c.name, err)
	}
	return nil
}

// Kubeconfig returns an admin kubeconfig for the cluster whose server is
// the API server's address on the host (127.0.0.1 and a port the engine
// chose).
func (c *Cluster) Kubeconfig() []byte { return append([]byte(nil), c.kubeconfig...) }

// KubeconfigPath returns the path of a file holding Kubeconfig: in the
// test's temporary directory for Start, in a temporary directory removed by
// Delete for New. ~/.kube/config is never touched.
func (c *Cluster) KubeconfigPath() string { return c.kubeconfigPath }

// APIServer returns the API server's URL on the host.
func (c *Cluster) APIServer() string { return c.apiServer }

// waitReady waits until the API server answers ready, every node is Ready,
// the default service account exists and CoreDNS is ready. On timeout it
// says which condition failed and what the cluster showed then.
func (c *Cluster) waitReady(ctx context.Context) error {
	api, err := newAPIClient(c.kubeconfig)
	if err != nil {
		return fmt.Errorf("cluster %s: %w", c.name, err)
	}
	defer api.close()
	pending := "API server ready"
	var detail string
	start, last := time.Now(), ""
	err = waitFor(ctx, 50*time.Millisecond, 500*time.Millisecond, func() (bool, error) {
		pending, detail = c.notReady(ctx, api)
		if pending != last {
			// Which conditions took how long is what tuning needs.
			if last != "" {
				c.log.Printf("kindtest: %s: %s after %v", c.name, last, time.Since(start).Round(time.Millisecond))
			}
			last = pending
		}
		return pending == "", nil
	})
	if err != nil {
		var b strings.Builder
		fmt.Fprintf(&b, "cluster %s: not ready: waiting for %s", c.name, pending)
		if detail != "" {
			fmt.Fprintf(&b, ": %s", detail)
		}
		if d := c.podDiagnostics(api); d != "" {
			fmt.Fprintf(&b, "\n%s", d)
		}
		for _, n := range c.nodes {
			if d := c.kubeletDiagnostics(n); d != "" {
				fmt.Fprintf(&b, "\n%s", d)
			}
		}
		return fmt.Errorf("%s: %w", b.String(), err)
	}
	return nil
}

// notReady returns the first readiness condition not yet met, and why, or
// "" when the cluster is ready.
func (c *Cluster) notReady(ctx context.Context, api *apiClient) (string, string) {
	if err := api.get(ctx, "/readyz", nil); err != nil {
		return "API server ready", err.Error()
	}
	var nodes nodeList
	if err := api.get(ctx, "/api/v1/nodes", &nodes); err != nil {
		return "nodes Ready", err.Error()
	}
	ready := map[string]bool{}
	for _, item := range nodes.Items {
		for _, cond := range item.Status.Conditions {
			if cond.Type == "Ready" && cond.Status == "True" {
				ready[item.Metadata.Name] = true
			}
		}
	}
	var missing []string
	for _, n := range c.nodes {
		if !ready[n.name] {
			missing = append(missing, n.name)
		}
	}
	if len(missing) > 0 {
		return "nodes Ready", "not Ready: " + strings.Join(missing, ", ")
	}
	if err := api.get(ctx, "/api/v1/namespaces/default/serviceaccounts/default", nil); err != nil {
		return "default service account", err.Error()
	}
	var dns deployment
	if err := api.get(ctx, "/apis/apps/v1/namespaces/kube-system/deployments/coredns", &dns); err != nil {
		return "CoreDNS ready", err.Error()
	}
	want := 1
	if dns.Spec.Replicas != nil {
		want = *dns.Spec.Replicas
	}
	if dns.Status.ReadyReplicas < want || dns.Status.UpdatedReplicas < want {
		return "CoreDNS ready", fmt.Sprintf("%d of %d replicas ready", dns.Status.ReadyReplicas, want)
	}
	return "", ""
}

// podDiagnostics lists the pods that are not ready, with the reasons their
// containers give.
func (c *Cluster) podDiagnostics(api *apiClient) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var pods podList
	if err := api.get(ctx, "/api/v1/pods", &pods); err != nil {
		return "pods: " + err.Error()
	}
	var lines []string
	for _, p := range pods.Items {
		ready := false
		for _, cond := range p.Status.Conditions {
			if cond.Type == "Ready" && cond.Status == "True" {
				ready = true
			}
		}
		if ready || p.Status.Phase == "Succeeded" {
			continue
		}
		line := fmt.Sprintf("%s/%s on %q: %s", p.Metadata.Namespace, p.Metadata.Name, p.Spec.NodeName, p.Status.Phase)
		for _, cs := range p.Status.ContainerStatuses {
			for state, s := range cs.State {
				if s.Reason != "" || s.Message != "" {
					line += fmt.Sprintf("; %s %s: %s %s", cs.Name, state, s.Reason, s.Message)
				}
			}
		}
		lines = append(lines, "    "+line)
	}
	if len(lines) == 0 {
		return ""
	}
	sort.Strings(lines)
	return "pods not ready:\n" + strings.Join(lines, "\n")
}

// Kubectl runs kubectl inside the control-plane node (with several, the
// first one running) with the admin kubeconfig, so the host needs no
// kubectl. A non-zero exit is an *ExitError.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (ExecResult, error) {
	return c.KubectlInput(ctx, nil, args...)
}

// KubectlInput is Kubectl with stdin, as in `kubectl apply -f -`.
func (c *Cluster) KubectlInput(ctx context.Context, stdin io.Reader, args ...string) (ExecResult, error) {
	if !c.cfg.kubernetes {
		return ExecResult{}, errors.New("kubectl: cluster " + c.name + " was made WithoutKubernetes")
	}
	cmd := append([]string{"kubectl", "--kubeconfig", adminKubeconfig}, args...)
	cp, err := c.runningControlPlane(ctx)
	if err != nil {
		return ExecResult{}, err
	}
	return cp.ExecInput(ctx, stdin, cmd...)
}

// Apply applies manifests (YAML or JSON, several documents allowed) with
// kubectl apply.
func (c *Cluster) Apply(ctx context.Context, manifests []byte) error {
	_, err := c.KubectlInput(ctx, strings.NewReader(string(manifests)), "apply", "-f", "-")
	return err
}

// PodExec runs cmd in a container of a pod (the first container when
// container is "") through kubectl exec.
func (c *Cluster) PodExec(ctx context.Context, namespace, pod, container string, cmd ...string) (ExecResult, error) {
	args := []string{"exec", "-n", namespace, pod}
	if container != "" {
		args = append(args, "-c", container)
	}
	args = append(args, "--")
	return c.Kubectl(ctx, append(args, cmd...)...)
}
