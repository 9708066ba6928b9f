package kindtest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kindtest/kindtest/kindtest"
)

// lbService is a LoadBalancer Service in front of the echo pods, on two
// ports.
const lbService = `apiVersion: v1
kind: Service
metadata: {name: echo-lb, namespace: default}
spec:
  type: LoadBalancer
  selector: {app: echo}
  ports:
  - {name: http, port: 80, targetPort: 8080}
  - {name: alt, port: 8081, targetPort: 8080}
`

// TestLoadBalancerServices gives a LoadBalancer Service on a control
// plane and a worker its load balancer: the test process reaches both of
// its ports at LoadBalancerAddr, a pod reaches it at the address in the
// Service's status, and once the Service is deleted its load balancer goes.
func TestLoadBalancerServices(t *testing.T) {
	dc := engine(t)
	echo, manifest := echoApp(t)
	c := start(t, dc, kindtest.WithWorkers(1))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pods := deployEcho(ctx, t, c, echo, manifest, lbService)
	began := time.Now()
	if err := c.Wait(ctx, "default", "service/echo-lb", kindtest.HasAddress); err != nil {
		t.Fatal(err)
	}
	t.Logf("Wait HasAddress: %s after the Service", time.Since(began).Round(time.Millisecond))
	for _, port := range []int{80, 8081} {
		addr, err := c.LoadBalancerAddr(ctx, "default", "echo-lb", port)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("port %d at %s (%s after the Service)", port, addr, time.Since(began).Round(time.Millisecond))
		var body string
		err = retry(ctx, func() (err error) { body, err = httpGet(ctx, "http://"+addr+"/lb"); return err })
		if err != nil || !strings.Contains(body, "path=/lb") {
			t.Errorf("GET http://%s/lb: %q %v", addr, body, err)
		}
	}
	res, err := c.Kubectl(ctx, "get", "service", "echo-lb", "-o", "jsonpath={.status.loadBalancer.ingress[0].ip} {.status.loadBalancer.ingress[0].ipMode}")
	if err != nil {
		t.Fatal(err)
	}
	ip, mode, _ := strings.Cut(res.Stdout, " ")
	if ip == "" || mode != "Proxy" {
		t.Fatalf("status.loadBalancer.ingress: %q", res.Stdout)
	}
	out, err := c.PodExec(ctx, "default", pods[0].name, "", "/echo", "get", "http://"+ip+"/in-cluster")
	if err != nil || !strings.Contains(out.Stdout, "path=/in-cluster") {
		t.Errorf("from pod %s to the load balancer at %s: %q %v", pods[0].name, ip, out.Stdout, err)
	}
	// What cannot get an address says so at once.
	for _, tc := range []struct {
		name string
		port int
		want string
	}{{"echo-lb", 9999, "has no port 9999 (its ports: 80, 8081)"}, {"echo", 80, "of type ClusterIP, not LoadBalancer"}, {"nope", 80, "there is no Service default/nope"}} {
		if _, err := c.LoadBalancerAddr(ctx, "default", tc.name, tc.port); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadBalancerAddr(%s, %d): %v, want an error saying %q", tc.name, tc.port, err, tc.want)
		}
	}

	if _, err := c.Kubectl(ctx, "delete", "service", "echo-lb"); err != nil {
		t.Fatal(err)
	}
	sel := map[string]string{kindtest.LabelCluster: c.Name(), kindtest.LabelRole: kindtest.RoleServiceLoadBalancer}
	err = retry(ctx, func() error {
		if cs, err := dc.ListContainers(ctx, sel); err != nil || len(cs) != 0 {
			return fmt.Errorf("load balancer still there: %v %v", cs, err)
		}
		return nil
	})
	if err != nil {
		t.Errorf("after deleting the Service: %v", err)
	}
}
