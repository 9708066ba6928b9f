// Package ginkgo shows kindtest in a Ginkgo suite: one cluster for the
// whole suite, made in BeforeSuite and removed after it.
//
//	go test ./examples/ginkgo/...
package ginkgo

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/kindtest/kindtest/internal/fixture"
	"github.com/kindtest/kindtest/kindtest"
)

func TestSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("engine test: needs a Docker engine and the node image; skipped under -short")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "kindtest Ginkgo example")
}

var cluster *kindtest.Cluster

var _ = BeforeSuite(func(ctx SpecContext) {
	// GinkgoT's Cleanup is DeferCleanup: the cluster goes when the suite
	// ends.
	cluster = kindtest.Start(GinkgoT())
	image, err := fixture.BuildEcho(ctx)
	Expect(err).NotTo(HaveOccurred())
	Expect(cluster.LoadImage(ctx, image)).To(Succeed())
	manifest, err := fixture.Manifest("echo.yaml")
	Expect(err).NotTo(HaveOccurred())
	Expect(cluster.Apply(ctx, manifest)).To(Succeed())
	_, err = cluster.Kubectl(ctx, "rollout", "status", "deployment/echo", "--timeout=2m")
	Expect(err).NotTo(HaveOccurred())
})

var _ = Describe("the echo workload", func() {
	It("answers through its Service's DNS name", func(ctx SpecContext) {
		pods, err := cluster.Kubectl(ctx, "get", "pods", "-l", "app=echo", "-o", "jsonpath={.items[0].metadata.name}")
		Expect(err).NotTo(HaveOccurred())
		// kube-proxy programs a new Service's endpoints a moment after the
		// rollout reports ready: poll, do not assume.
		Eventually(func(g Gomega) {
			res, err := cluster.PodExec(ctx, "default", pods.Stdout, "", "/echo", "get", "http://echo.default.svc.cluster.local/ginkgo")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Stdout).To(ContainSubstring("path=/ginkgo"))
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	})

	It("has every replica ready on the single node", func(ctx SpecContext) {
		res, err := cluster.Kubectl(ctx, "get", "deployment", "echo", "-o", "jsonpath={.status.readyReplicas}")
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Stdout).To(Equal("3"))
		nodes, err := cluster.Kubectl(ctx, "get", "pods", "-l", "app=echo", "-o", "jsonpath={.items[*].spec.nodeName}")
		Expect(err).NotTo(HaveOccurred())
		for _, n := range strings.Fields(nodes.Stdout) {
			Expect(n).To(Equal(cluster.ControlPlane().Name()))
		}
	})

	It("reports a failing command with its exit code and output", func(ctx SpecContext) {
		_, err := cluster.ControlPlane().Exec(ctx, "sh", "-c", "echo nope >&2; exit 7")
		var exitErr *kindtest.ExitError
		Expect(err).To(BeAssignableToTypeOf(exitErr))
		exitErr = err.(*kindtest.ExitError)
		Expect(exitErr.ExitCode).To(Equal(7))
		Expect(exitErr.Stderr).To(Equal("nope\n"))
	})
})

// Reaching the workload from the spec's own process, and a namespace per
// spec that Ginkgo's DeferCleanup removes.
var _ = Describe("the test process", Ordered, func() {
	var ns string

	It("gets a namespace of its own and reaches the Service through PortForward", func(ctx SpecContext) {
		ns = cluster.Namespace(GinkgoT())
		_, err := cluster.Kubectl(ctx, "create", "configmap", "spec-data", "-n", ns, "--from-literal=a=b")
		Expect(err).NotTo(HaveOccurred())

		addr, stop, err := cluster.PortForward(ctx, "default", "svc/echo", 80)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(stop)
		resp, err := http.Get("http://" + addr + "/from-ginkgo")
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(body)).To(ContainSubstring("path=/from-ginkgo"))
	})

	It("finds the previous spec's namespace gone", func(ctx SpecContext) {
		Expect(ns).NotTo(BeEmpty())
		res, err := cluster.Kubectl(ctx, "get", "namespaces", "-o", "name")
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Stdout).NotTo(ContainSubstring("namespace/" + ns))
	})
})
