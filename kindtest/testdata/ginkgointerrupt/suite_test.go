// Package ginkgointerrupt is a Ginkgo suite that its parent test
// interrupts with SIGINT while a spec runs (see TestGinkgoInterrupt).
package ginkgointerrupt

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/kindtest/kindtest/kindtest"
)

func TestSuite(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "interrupted suite")
}

var cluster *kindtest.Cluster

var _ = BeforeSuite(func() {
	cluster = kindtest.Start(GinkgoT(), kindtest.WithoutKubernetes())
	fmt.Printf("SUITE cluster=%s\n", cluster.Name())
	DeferCleanup(func() { fmt.Println("DEFERCLEANUP RAN") })
})

var _ = It("runs until interrupted", func(ctx SpecContext) {
	fmt.Println("SPEC RUNNING")
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Minute):
	}
	Expect(cluster.Name()).NotTo(BeEmpty())
})
