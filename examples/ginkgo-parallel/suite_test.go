// Package parallel shows one cluster shared by every process of a parallel
// Ginkgo run: process 1 creates it in SynchronizedBeforeSuite, the others
// attach to it by name, and it is removed once all of them have finished.
//
//	go run github.com/onsi/ginkgo/v2/ginkgo -p ./examples/ginkgo-parallel
//	go test ./examples/ginkgo-parallel/...   (one process works too)
package parallel

import (
	"fmt"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/kindtest/kindtest/kindtest"
)

func TestSuite(t *testing.T) {
	if testing.Short() {
		t.Skip("engine test: needs a Docker engine and the node image; skipped under -short")
	}
	RegisterFailHandler(Fail)
	RunSpecs(t, "kindtest parallel Ginkgo example")
}

var cluster *kindtest.Cluster

var _ = SynchronizedBeforeSuite(func() []byte {
	// Process 1 only. Start's cleanup maps to DeferCleanup, which here runs
	// after every parallel process has finished.
	c := kindtest.Start(GinkgoT())
	return []byte(c.Name())
}, func(ctx SpecContext, name []byte) {
	var err error
	cluster, err = kindtest.Attach(ctx, string(name), kindtest.WithLogger(GinkgoWriter))
	Expect(err).NotTo(HaveOccurred())
	// Every process lets go of its handle; the cluster itself stays until
	// process 1's cleanup removes it.
	DeferCleanup(cluster.Close)
})

// Each spec works in a namespace of its own, named after its process, so
// that specs running at the same time do not see each other's objects.
var _ = Describe("a shared cluster", func() {
	var ns string
	specs := 0
	BeforeEach(func(ctx SpecContext) {
		specs++
		ns = fmt.Sprintf("p%d-%d", GinkgoParallelProcess(), specs)
		_, err := cluster.Kubectl(ctx, "create", "namespace", ns)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			_, err := cluster.Kubectl(ctx, "delete", "namespace", ns, "--wait=false")
			Expect(err).NotTo(HaveOccurred())
		})
	})

	for i := range 3 {
		It(fmt.Sprintf("runs config map round trip %d", i), func(ctx SpecContext) {
			_, err := cluster.Kubectl(ctx, "-n", ns, "create", "configmap", "cm", "--from-literal=k=v")
			Expect(err).NotTo(HaveOccurred())
			res, err := cluster.Kubectl(ctx, "-n", ns, "get", "configmap", "cm", "-o", "jsonpath={.data.k}")
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Stdout).To(Equal("v"))
			_, err = cluster.Kubectl(ctx, "-n", ns, "delete", "configmap", "cm")
			Expect(err).NotTo(HaveOccurred())
		})
	}

	It("sees the same cluster from every process", func(ctx SpecContext) {
		Expect(cluster.Nodes()).To(HaveLen(1))
		res, err := cluster.Kubectl(ctx, "get", "nodes", "-o", "name")
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Stdout).To(Equal("node/" + cluster.ControlPlane().Name() + "\n"))
	})
})
