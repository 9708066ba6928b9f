package kindtest_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/kindtest/kindtest/kindtest"
)

// childEnv, when set, makes the test binary act as a test process that
// creates a cluster and is then killed, interrupted or ended by its parent
// test. Its value is the mode: "create" (create, then wait), "exit"
// (create, then os.Exit(1) as a test body may), "cycle" (create,
// delete, exit 0), "hold" (create, wait for standard input to end,
// delete), "pool" (a pool of two such clusters, then wait) or "attach"
// (attach to the cluster named by childAttachEnv, print its kubeconfig's
// path, then wait).
const childEnv = "KINDTEST_TEST_CHILD"

// childReaperEnv gives the child a reaper container of its own.
const childReaperEnv = "KINDTEST_TEST_REAPER_NAME"

// childAttachEnv names the cluster an "attach" child attaches to.
const childAttachEnv = "KINDTEST_TEST_ATTACH"

// childDeleteTimeoutEnv, a duration, is the child's WithDeleteTimeout.
const childDeleteTimeoutEnv = "KINDTEST_TEST_DELETE_TIMEOUT"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode))
	}
	os.Exit(m.Run())
}

// childShape are the options of a child's cluster, and of the pool it
// may claim from.
func childShape() []kindtest.Option {
	return []kindtest.Option{kindtest.WithoutKubernetes(), kindtest.WithWorkers(1), kindtest.WithNamePrefix("child")}
}

// child creates a cluster, printing progress on stdout, then does what
// mode says.
func child(mode string) int {
	if name := os.Getenv(childReaperEnv); name != "" {
		kindtest.SetReaperNameForTest(name)
	}
	log := kindtest.LoggerFunc(func(format string, args ...any) {
		fmt.Printf(format+"\n", args...)
	})
	ctx := context.Background()
	opts := append(childShape(), kindtest.WithLogger(log))
	if d, err := time.ParseDuration(os.Getenv(childDeleteTimeoutEnv)); err == nil {
		opts = append(opts, kindtest.WithDeleteTimeout(d))
	}
	if mode == "attach" {
		c, err := kindtest.Attach(ctx, os.Getenv(childAttachEnv), kindtest.WithLogger(log))
		if err != nil {
			fmt.Println("child: attach failed:", err)
			return 1
		}
		fmt.Println("child: attached, kubeconfig", c.KubeconfigPath())
		time.Sleep(10 * time.Minute)
		return 0
	}
	if mode == "pool" {
		// A pool of two of the children's clusters, killed by its parent.
		p, err := kindtest.NewPool(ctx, kindtest.PoolConfig{Size: 2}, opts...)
		if err != nil {
			fmt.Println("child: pool failed:", err)
			return 1
		}
		if err := p.WaitReady(ctx, 2); err != nil {
			fmt.Println("child: pool failed:", err)
			return 1
		}
		fmt.Println("child: pool ready", p.Env())
		time.Sleep(10 * time.Minute)
		return 0
	}
	c, err := kindtest.New(ctx, opts...)
	if err != nil {
		fmt.Println("child: create failed:", err)
		return 1
	}
	fmt.Println("child: created", c.Name())
	switch mode {
	case "exit":
		os.Exit(1)
	case "hold":
		// Holds the cluster until its parent closes standard input.
		_, _ = io.Copy(io.Discard, os.Stdin)
		if err := c.Delete(ctx); err != nil {
			fmt.Println("child: delete failed:", err)
			return 1
		}
		fmt.Println("child: deleted", c.Name())
		return 0
	case "cycle":
		if err := c.Delete(ctx); err != nil {
			fmt.Println("child: delete failed:", err)
			return 1
		}
		fmt.Println("child: deleted", c.Name())
		return 0
	}
	time.Sleep(10 * time.Minute)
	return 0
}
