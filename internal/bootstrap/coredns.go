package bootstrap

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// FitCoreDNS adjusts the CoreDNS manifests kubeadm prints to a test
// cluster: replicas replicas, and a readiness probe every second instead
// of every ten (the first probe of a pod on a freshly started kubelet
// comes at a random point within the period, which alone could cost ten
// seconds). CoreDNS reaches the API server at apiHost:apiPort rather than
// through the kubernetes Service, so that it is ready without waiting for
// kube-proxy to program that Service. The Deployment goes last, after the
// service account its pods need, so that no pod creation fails and waits
// for a retry. The manifests are edited as parsed YAML; the other
// documents keep their content and order.
func FitCoreDNS(manifests string, replicas int, apiHost string, apiPort int) (string, error) {
	dec := yaml.NewDecoder(strings.NewReader(manifests))
	var docs []*yaml.Node
	var deployment *yaml.Node
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return "", fmt.Errorf("kubeadm's CoreDNS manifests: %w", err)
		}
		if len(doc.Content) == 0 {
			continue
		}
		if kind := lookup(doc.Content[0], "kind"); kind != nil && kind.Value == "Deployment" {
			if err := fitDeployment(doc.Content[0], replicas, apiHost, apiPort); err != nil {
				return "", err
			}
			deployment = &doc
			continue
		}
		docs = append(docs, &doc)
	}
	if deployment == nil {
		return "", errors.New("kubeadm's CoreDNS manifests have no Deployment")
	}
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	enc.CompactSeqIndent()
	for _, doc := range append(docs, deployment) {
		if err := enc.Encode(doc); err != nil {
			return "", fmt.Errorf("CoreDNS manifests: %w", err)
		}
	}
	if err := enc.Close(); err != nil {
		return "", fmt.Errorf("CoreDNS manifests: %w", err)
	}
	return b.String(), nil
}

// fitDeployment makes FitCoreDNS's changes to the Deployment d.
func fitDeployment(d *yaml.Node, replicas int, apiHost string, apiPort int) error {
	spec := lookup(d, "spec")
	if spec == nil {
		return errors.New("kubeadm's CoreDNS Deployment has no spec")
	}
	set(spec, "replicas", scalar("!!int", strconv.Itoa(replicas)))
	containers := lookup(lookup(lookup(spec, "template"), "spec"), "containers")
	probed := false
	for _, c := range seqItems(containers) {
		probe := lookup(c, "readinessProbe")
		if probe == nil || probe.Kind != yaml.MappingNode {
			continue
		}
		port := scalar("!!str", strconv.Itoa(apiPort))
		port.Style = yaml.DoubleQuotedStyle
		vars := []*yaml.Node{
			envVar("KUBERNETES_SERVICE_HOST", scalar("!!str", apiHost)),
			envVar("KUBERNETES_SERVICE_PORT", port),
		}
		if env := lookup(c, "env"); env != nil && env.Kind == yaml.SequenceNode {
			env.Content = append(env.Content, vars...)
		} else {
			insertBefore(c, "readinessProbe", "env", &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: vars})
		}
		if period := lookup(probe, "periodSeconds"); period != nil {
			*period = *scalar("!!int", "1")
		} else {
			probe.Content = append([]*yaml.Node{scalar("!!str", "periodSeconds"), scalar("!!int", "1")}, probe.Content...)
		}
		probed = true
	}
	if !probed {
		return errors.New("kubeadm's CoreDNS Deployment has no container with a readinessProbe to adjust")
	}
	return nil
}

// lookup returns the value of key in the mapping m, nil when m is not a
// mapping or has no such key.
func lookup(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// set sets key to v in the mapping m, in place when m has the key, else
// at the end.
func set(m *yaml.Node, key string, v *yaml.Node) {
	if old := lookup(m, key); old != nil {
		*old = *v
		return
	}
	m.Content = append(m.Content, scalar("!!str", key), v)
}

// insertBefore adds key: v to the mapping m just before the key before.
func insertBefore(m *yaml.Node, before, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == before {
			m.Content = append(m.Content[:i], append([]*yaml.Node{scalar("!!str", key), v}, m.Content[i:]...)...)
			return
		}
	}
	m.Content = append(m.Content, scalar("!!str", key), v)
}

// seqItems returns the items of the sequence s, none when s is not one.
func seqItems(s *yaml.Node) []*yaml.Node {
	if s == nil || s.Kind != yaml.SequenceNode {
		return nil
	}
	return s.Content
}

func scalar(tag, value string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value}
}

// envVar is a container's environment variable: name and value.
func envVar(name string, value *yaml.Node) *yaml.Node {
	return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{
		scalar("!!str", "name"), scalar("!!str", name), scalar("!!str", "value"), value,
	}}
}
