package kindtest

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// kindUnsupported explains, per field of kind's v1alpha4 Cluster, why
// kindtest cannot honour it.
var kindUnsupported = map[string]string{
	"name":                               "kindtest names clusters itself: use WithNamePrefix",
	"kubeadmConfigPatches":               "kindtest writes kubeadm's configuration itself: use WithComponentArgs, WithKubeletConfig, WithFeatureGates or WithRuntimeConfig",
	"kubeadmConfigPatchesJSON6902":       "kindtest writes kubeadm's configuration itself: use WithComponentArgs, WithKubeletConfig, WithFeatureGates or WithRuntimeConfig",
	"containerdConfigPatches":            "the node image's containerd configuration is fixed",
	"containerdConfigPatchesJSON6902":    "the node image's containerd configuration is fixed",
	"nodes.image":                        "every node runs the cluster's node image: use WithImage",
	"nodes.kubeadmConfigPatches":         "kindtest writes kubeadm's configuration itself: use WithComponentArgs, WithKubeletConfig",
	"nodes.kubeadmConfigPatchesJSON6902": "kindtest writes kubeadm's configuration itself: use WithComponentArgs, WithKubeletConfig",
	"networking.apiServerAddress":        "kindtest decides where the API server is published (see the README: Which engine, and from where)",
	"networking.apiServerPort":           "the engine picks the API server's host port",
	"networking.dnsSearch":               "the nodes' DNS search list is the engine's",
}

// kindDefaults are values of unsupported fields that are what kindtest
// does anyway, so that a kind config spelling them out is accepted.
var kindDefaults = map[string]string{}

type kindCluster struct {
	Kind          string            `yaml:"kind"`
	APIVersion    string            `yaml:"apiVersion"`
	Nodes         []kindNode        `yaml:"nodes"`
	FeatureGates  map[string]bool   `yaml:"featureGates"`
	RuntimeConfig map[string]string `yaml:"runtimeConfig"`
}

type kindNode struct {
	Role              string            `yaml:"role"`
	Labels            map[string]string `yaml:"labels"`
	ExtraMounts       []kindMount       `yaml:"extraMounts"`
	ExtraPortMappings []kindPortMapping `yaml:"extraPortMappings"`
}

type kindPortMapping struct {
	ContainerPort int    `yaml:"containerPort"`
	HostPort      int    `yaml:"hostPort"`
	ListenAddress string `yaml:"listenAddress"`
	Protocol      string `yaml:"protocol"`
}

type kindMount struct {
	HostPath       string `yaml:"hostPath"`
	ContainerPath  string `yaml:"containerPath"`
	ReadOnly       bool   `yaml:"readOnly"`
	SelinuxRelabel bool   `yaml:"selinuxRelabel"`
	Propagation    string `yaml:"propagation"`
}

func applyKindConfig(c *config, data []byte) error {
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("not YAML: %w", err)
	}
	if raw == nil {
		return errors.New("empty")
	}
	var errs []error
	unsupported := func(field string, value any) {
		if d, ok := kindDefaults[field]; ok && fmt.Sprint(value) == d {
			return
		}
		errs = append(errs, fmt.Errorf("field %s is not supported by kindtest: %s (kindtest supports %s)", field, kindUnsupported[field], kindFieldList))
	}
	known := map[string]bool{"kind": true, "apiVersion": true, "nodes": true, "featureGates": true, "runtimeConfig": true, "networking": true}
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		switch {
		case kindUnsupported[k] != "":
			unsupported(k, raw[k])
		case !known[k]:
			errs = append(errs, fmt.Errorf("field %s: not a field of kind's v1alpha4 Cluster", k))
		}
	}
	if nw, ok := raw["networking"].(map[string]any); ok {
		for _, k := range slices.Sorted(maps.Keys(nw)) {
			if k == "disableDefaultCNI" {
				switch v := nw[k].(type) {
				case bool:
					c.noDefaultCNI = v // as WithoutDefaultCNI
				default:
					errs = append(errs, fmt.Errorf("field networking.disableDefaultCNI: %v is not true or false", v))
				}
				continue
			}
			if k == "podSubnet" || k == "serviceSubnet" {
				opt := WithPodSubnet
				if k == "serviceSubnet" {
					opt = WithServiceSubnet
				}
				v, _ := nw[k].(string)
				if err := opt(v)(c); err != nil {
					errs = append(errs, fmt.Errorf("field networking.%s: %w", k, err))
				}
				continue
			}
			if k == "ipFamily" {
				f, _ := nw[k].(string)
				if err := WithIPFamily(IPFamily(f))(c); err != nil {
					errs = append(errs, fmt.Errorf("field networking.ipFamily: %w", err))
				}
				continue
			}
			if k == "kubeProxyMode" {
				mode, _ := nw[k].(string)
				if err := WithKubeProxyMode(KubeProxyMode(mode))(c); err != nil {
					errs = append(errs, fmt.Errorf("field networking.kubeProxyMode: %w", err))
				}
				continue
			}
			if kindUnsupported["networking."+k] != "" {
				unsupported("networking."+k, nw[k])
			} else {
				errs = append(errs, fmt.Errorf("field networking.%s: not a field of kind's v1alpha4 Cluster", k))
			}
		}
	} else if raw["networking"] != nil {
		errs = append(errs, errors.New("field networking: not a mapping"))
	}
	if nodes, ok := raw["nodes"].([]any); ok {
		nodeKnown := map[string]bool{"role": true, "labels": true, "extraMounts": true, "extraPortMappings": true}
		for i, n := range nodes {
			m, ok := n.(map[string]any)
			if !ok {
				errs = append(errs, fmt.Errorf("field nodes[%d]: not a mapping", i))
				continue
			}
			for _, k := range slices.Sorted(maps.Keys(m)) {
				switch {
				case kindUnsupported["nodes."+k] != "":
					errs = append(errs, fmt.Errorf("field nodes[%d].%s is not supported by kindtest: %s", i, k, kindUnsupported["nodes."+k]))
				case !nodeKnown[k]:
					errs = append(errs, fmt.Errorf("field nodes[%d].%s: not a field of kind's v1alpha4 Node", i, k))
				}
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}

	var kc kindCluster
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&kc); err != nil {
		return fmt.Errorf("not a kind Cluster: %w", err)
	}
	if kc.Kind != "Cluster" || kc.APIVersion != "kind.x-k8s.io/v1alpha4" {
		return fmt.Errorf("kind %q, apiVersion %q: want kind: Cluster, apiVersion: kind.x-k8s.io/v1alpha4", kc.Kind, kc.APIVersion)
	}
	// Node 0 is the first control plane, then the workers in order, then
	// the other control planes, as WithControlPlanes indexes them.
	var cps, workers []kindNode
	for i, n := range kc.Nodes {
		switch n.Role {
		case "control-plane":
			cps = append(cps, n)
		case "worker":
			workers = append(workers, n)
		default:
			errs = append(errs, fmt.Errorf("nodes[%d].role %q: use control-plane or worker", i, n.Role))
		}
		for j, pm := range n.ExtraPortMappings {
			// Only the first control plane, node 0, publishes ports.
			if n.Role != "control-plane" || len(cps) > 1 {
				errs = append(errs, fmt.Errorf("field nodes[%d].extraPortMappings: kindtest publishes ports of the first control-plane node only; a NodePort Service answers there too", i))
				break
			}
			if pm.ListenAddress != "" {
				errs = append(errs, fmt.Errorf("field nodes[%d].extraPortMappings[%d].listenAddress is not supported by kindtest: ports are published where the API server is (see WithPortMapping)", i, j))
			}
			if pm.Protocol != "" && !strings.EqualFold(pm.Protocol, "TCP") {
				errs = append(errs, fmt.Errorf("field nodes[%d].extraPortMappings[%d].protocol %q is not supported by kindtest (only TCP)", i, j, pm.Protocol))
			}
		}
		for j, m := range n.ExtraMounts {
			if m.SelinuxRelabel {
				errs = append(errs, fmt.Errorf("field nodes[%d].extraMounts[%d].selinuxRelabel is not supported by kindtest", i, j))
			}
			if m.Propagation != "" && m.Propagation != "None" {
				errs = append(errs, fmt.Errorf("field nodes[%d].extraMounts[%d].propagation %q is not supported by kindtest (only None)", i, j, m.Propagation))
			}
		}
	}
	if len(kc.Nodes) == 0 {
		// kind's default: one control-plane node.
		cps = []kindNode{{Role: "control-plane"}}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// The counts are WithWorkers' and WithControlPlanes': their checks,
	// once every option is applied, judge them (validate).
	c.workers, c.controlPlanes = len(workers), len(cps)
	var order []kindNode
	if len(cps) > 0 {
		order = append(append(append(order, cps[0]), workers...), cps[1:]...)
	}
	opts := []Option{}
	if len(kc.FeatureGates) > 0 {
		opts = append(opts, WithFeatureGates(kc.FeatureGates))
	}
	if len(kc.RuntimeConfig) > 0 {
		opts = append(opts, WithRuntimeConfig(kc.RuntimeConfig))
	}
	for i, n := range order {
		if len(n.Labels) > 0 {
			opts = append(opts, WithNodeLabels(i, n.Labels))
		}
		for _, m := range n.ExtraMounts {
			opts = append(opts, WithNodeMounts(i, Mount{HostPath: m.HostPath, ContainerPath: m.ContainerPath, ReadOnly: m.ReadOnly}))
		}
		for _, pm := range n.ExtraPortMappings {
			opts = append(opts, WithPortMapping(pm.HostPort, pm.ContainerPort))
		}
	}
	for _, o := range opts {
		if err := o(c); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// kindFieldList is the supported subset, for messages.
var kindFieldList = strings.Join([]string{"nodes[].role", "nodes[].labels", "nodes[].extraMounts", "nodes[].extraPortMappings (control plane, TCP)", "featureGates", "runtimeConfig", "networking.disableDefaultCNI", "networking.kubeProxyMode (iptables, nftables, ipvs)", "networking.podSubnet", "networking.serviceSubnet", "networking.ipFamily (ipv4, ipv6, dual)"}, ", ")
