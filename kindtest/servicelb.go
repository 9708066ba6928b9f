// LoadBalancer Services (unless WithoutLoadBalancer): a load-balancer
// container per Service, as cloud-provider-kind makes them, run by the
// process that made the cluster.

package kindtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/poll"
)

// Labels of a Service's load-balancer container: which Service, and the
// ports it forwards (PORT:NODEPORT,...), so that a changed Service gets a
// new container.
const (
	labelService      = "dev.kindtest.service"
	labelServicePorts = "dev.kindtest.service-ports"
)

// serviceLBInterval is how often the Services are looked at.
const serviceLBInterval = time.Second

// serviceLBs runs the Services' load balancers for one cluster.
type serviceLBs struct {
	c      *Cluster
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	said   map[string]string // the last problem logged per Service
	// made is set once the cluster has had a load-balancer container:
	// until then no Service of type LoadBalancer means nothing to do.
	made bool
	// ips are the containers' addresses by ID (see address).
	ips map[string]string
}

// lbService is what the controller needs of a Service.
type lbService struct {
	Metadata struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Type  string `json:"type"`
		Ports []struct {
			Port     int    `json:"port"`
			NodePort int    `json:"nodePort"`
			Protocol string `json:"protocol"`
		} `json:"ports"`
	} `json:"spec"`
	Status struct {
		LoadBalancer struct {
			Ingress []struct {
				IP string `json:"ip"`
			} `json:"ingress"`
		} `json:"loadBalancer"`
	} `json:"status"`
}

func (s lbService) key() string { return s.Metadata.Namespace + "/" + s.Metadata.Name }

// forwards is PORT:NODEPORT of each TCP port with a node port, in order.
func (s lbService) forwards() string {
	var out []string
	for _, p := range s.Spec.Ports {
		if (p.Protocol == "" || p.Protocol == "TCP") && p.NodePort > 0 {
			out = append(out, fmt.Sprintf("%d:%d", p.Port, p.NodePort))
		}
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// startServiceLBs starts the controller unless the cluster was made
// WithoutLoadBalancer.
func (c *Cluster) startServiceLBs() {
	if !c.cfg.loadBalancers() {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &serviceLBs{c: c, cancel: cancel, done: make(chan struct{}), said: map[string]string{}, ips: map[string]string{}}
	c.life.mu.Lock()
	c.life.stopLBs = func() { s.cancel(); <-s.done }
	c.life.mu.Unlock()
	go s.run(ctx)
}

func (s *serviceLBs) run(ctx context.Context) {
	defer close(s.done)
	api, err := newAPIClient(s.c.kubeconfig)
	if err != nil {
		s.c.log.Printf("kindtest: %s: LoadBalancer Services: %v", s.c.name, err)
		return
	}
	defer api.close()
	t := time.NewTicker(serviceLBInterval)
	defer t.Stop()
	for {
		if err := s.sync(ctx, api); err != nil && ctx.Err() == nil {
			s.say("", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// say logs a problem once, until it changes.
func (s *serviceLBs) say(key, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.said[key] == msg {
		return
	}
	s.said[key] = msg
	if msg != "" {
		s.c.log.Printf("kindtest: %s: LoadBalancer Services: %s", s.c.name, msg)
	}
}

// sync makes the load-balancer containers match the LoadBalancer Services
// and writes each one's address into its Service's status.
func (s *serviceLBs) sync(ctx context.Context, api *apiClient) error {
	var list struct {
		Items []lbService `json:"items"`
	}
	if err := api.get(ctx, "/api/v1/services", &list); err != nil {
		return err
	}
	if !s.made && !slices.ContainsFunc(list.Items, func(svc lbService) bool { return svc.Spec.Type == "LoadBalancer" }) {
		return nil // nothing to do, and no container to look for
	}
	cs, err := s.c.docker.ListContainers(ctx, map[string]string{LabelCluster: s.c.name, LabelRole: RoleServiceLoadBalancer})
	if err != nil {
		return err
	}
	s.made = s.made || len(cs) > 0
	have := map[string]docker.Container{}
	for _, ct := range cs {
		have[ct.Labels[labelService]] = ct
	}
	want := map[string]bool{}
	for _, svc := range list.Items {
		if svc.Spec.Type != "LoadBalancer" {
			continue
		}
		key, fwd := svc.key(), svc.forwards()
		if fwd == "" {
			s.say(key, "Service "+key+" has no TCP port with a node port (spec.allocateLoadBalancerNodePorts false, or UDP only): it gets no load balancer")
			continue
		}
		want[key] = true
		ct, ok := have[key]
		if ok && (ct.Labels[labelServicePorts] != fwd || !ct.Running) {
			if err := s.c.docker.RemoveContainer(ctx, ct.ID); err != nil {
				return err
			}
			delete(s.ips, ct.ID)
			ok = false
		}
		if !ok {
			if ct, err = s.create(ctx, svc, fwd); err != nil {
				s.say(key, fmt.Sprintf("Service %s: %v", key, err))
				continue
			}
		}
		ip, err := s.address(ctx, ct.ID)
		if err != nil {
			return err
		}
		if len(svc.Status.LoadBalancer.Ingress) == 1 && svc.Status.LoadBalancer.Ingress[0].IP == ip {
			s.say(key, "")
			continue
		}
		if err := setIngress(ctx, api, svc, ip); err != nil {
			// A Service deleted since the list is nothing to report:
			// the next sync removes its load balancer.
			if isStatus(err, http.StatusNotFound) {
				s.say(key, "")
				continue
			}
			s.say(key, fmt.Sprintf("Service %s: write its address: %v", key, err))
			continue
		}
		s.say(key, "")
		s.c.log.Printf("kindtest: %s: LoadBalancer Service %s at %s (ports %s)", s.c.name, key, ip, fwd)
	}
	for key, ct := range have {
		if !want[key] {
			if err := s.c.docker.RemoveContainer(ctx, ct.ID); err != nil {
				return err
			}
			delete(s.ips, ct.ID)
		}
	}
	return nil
}

// address is a load-balancer container's address on the cluster's
// network, inspected once per container.
func (s *serviceLBs) address(ctx context.Context, id string) (string, error) {
	if ip, ok := s.ips[id]; ok {
		return ip, nil
	}
	info, err := s.c.docker.InspectContainer(ctx, id)
	if err != nil {
		return "", err
	}
	s.ips[id] = info.IPs[s.c.name]
	return s.ips[id], nil
}

// create starts the load-balancer container of svc, forwarding each port
// to its node port on every node, published on the host.
func (s *serviceLBs) create(ctx context.Context, svc lbService, fwd string) (docker.Container, error) {
	sum := sha256.Sum256([]byte(svc.key()))
	labels := s.c.Labels()
	labels[LabelRole] = RoleServiceLoadBalancer
	labels[labelService] = svc.key()
	labels[labelServicePorts] = fwd
	spec := docker.ContainerSpec{
		Name:    s.c.name + "-lb-" + hex.EncodeToString(sum[:])[:8],
		Image:   LoadBalancerImage,
		Labels:  labels,
		Network: s.c.name,
	}
	for _, pn := range strings.Split(fwd, ",") {
		port, nodePort, _ := strings.Cut(pn, ":")
		var backends []string
		for _, n := range s.c.nodes {
			backends = append(backends, net.JoinHostPort(n.kubeIP(), nodePort))
		}
		spec.Cmd = append(spec.Cmd, "-forward=:"+port+"="+strings.Join(backends, ","))
		p, _ := strconv.Atoi(port)
		spec.Ports = append(spec.Ports, docker.PortBinding{HostIP: s.c.place.publishIP, ContainerPort: p})
	}
	id, err := s.c.docker.CreateContainer(ctx, spec)
	if err != nil {
		return docker.Container{}, err
	}
	s.made = true
	if err := s.c.docker.StartContainer(ctx, id); err != nil {
		return docker.Container{}, errors.Join(err, s.c.docker.RemoveContainer(context.WithoutCancel(ctx), id))
	}
	return docker.Container{ID: id, Labels: labels, Running: true}, nil
}

// setIngress writes ip as the only address of svc's load balancer. Its
// ipMode is Proxy: traffic to it goes through the load balancer, also
// from inside the cluster.
func setIngress(ctx context.Context, api *apiClient, svc lbService, ip string) error {
	path := "/api/v1/namespaces/" + svc.Metadata.Namespace + "/services/" + svc.Metadata.Name
	var obj map[string]any
	if err := api.get(ctx, path, &obj); err != nil {
		return err
	}
	obj["status"] = map[string]any{"loadBalancer": map[string]any{"ingress": []any{map[string]any{"ip": ip, "ipMode": "Proxy"}}}}
	return api.do(ctx, http.MethodPut, path+"/status", obj, nil)
}

// LoadBalancerAddr waits until the LoadBalancer Service namespace/name has
// its load balancer (see WithoutLoadBalancer), and returns the host:port
// this process dials for its port: on the engine's host (or a remote
// engine's), the port the engine published it on; from a container of
// the engine, the load balancer's address on the cluster's network, the
// one in the Service's status. It waits within ctx, 2 minutes when ctx has
// no deadline.
func (c *Cluster) LoadBalancerAddr(ctx context.Context, namespace, name string, port int) (string, error) {
	if err := c.usable("LoadBalancer address"); err != nil {
		return "", fmt.Errorf("kindtest: %w", err)
	}
	if !c.cfg.loadBalancers() {
		return "", fmt.Errorf("kindtest: cluster %s: LoadBalancer address of %s/%s: the cluster was made WithoutLoadBalancer, so LoadBalancer Services get no address", c.name, namespace, name)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
	}
	key := namespace + "/" + name
	api, err := newAPIClient(c.kubeconfig)
	if err != nil {
		return "", fmt.Errorf("kindtest: cluster %s: %w", c.name, err)
	}
	defer api.close()
	var addr string
	var last error
	err = poll.Until(ctx, 50*time.Millisecond, 500*time.Millisecond, func() (bool, error) {
		// What the Service says ends the wait at once.
		var svc lbService
		if err := api.get(ctx, "/api/v1/namespaces/"+namespace+"/services/"+name, &svc); isStatus(err, http.StatusNotFound) {
			return false, fmt.Errorf("there is no Service %s", key)
		} else if err != nil {
			last = err
			return false, nil
		}
		var ports []string
		for _, p := range svc.Spec.Ports {
			ports = append(ports, strconv.Itoa(p.Port))
		}
		switch {
		case svc.Spec.Type != "LoadBalancer":
			return false, fmt.Errorf("Service %s is of type %s, not LoadBalancer", key, svc.Spec.Type)
		case !slices.Contains(ports, strconv.Itoa(port)):
			return false, fmt.Errorf("Service %s has no port %d (its ports: %s)", key, port, strings.Join(ports, ", "))
		}
		cs, err := c.docker.ListContainers(ctx, map[string]string{LabelCluster: c.name, LabelRole: RoleServiceLoadBalancer, labelService: key})
		if err != nil || len(cs) != 1 || !cs[0].Running {
			last = err
			return false, nil
		}
		if !slices.ContainsFunc(strings.Split(cs[0].Labels[labelServicePorts], ","), func(pn string) bool { return strings.HasPrefix(pn, strconv.Itoa(port)+":") }) {
			last = fmt.Errorf("its load balancer forwards %s (PORT:NODEPORT), not port %d", cs[0].Labels[labelServicePorts], port)
			return false, nil
		}
		info, err := c.docker.InspectContainer(ctx, cs[0].ID)
		if err != nil {
			last = err
			return false, nil
		}
		if c.place.kind == placementContainer {
			addr = net.JoinHostPort(info.IPs[c.name], strconv.Itoa(port))
		} else {
			addr = info.Ports[fmt.Sprintf("%d/tcp", port)]
		}
		return addr != "", nil
	})
	if err != nil {
		if ctx.Err() == nil {
			return "", fmt.Errorf("kindtest: cluster %s: LoadBalancer address of %s port %d: %w", c.name, key, port, err)
		}
		detail := "the log says why"
		if last != nil {
			detail = last.Error()
		}
		return "", fmt.Errorf("kindtest: cluster %s: LoadBalancer Service %s has no load balancer for port %d (%v): %s", c.name, key, port, err, detail)
	}
	return addr, nil
}
