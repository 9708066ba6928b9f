package kindtest_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/kindtest/kindtest/kindtest"
)

// childEnv, when set, makes the test binary act as a test process that
// creates a cluster and is then killed or interrupted by its parent test.
const childEnv = "KINDTEST_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode))
	}
	os.Exit(m.Run())
}

// child creates a cluster, printing progress on stdout, then waits to be
// signalled.
func child(mode string) int {
	log := kindtest.LoggerFunc(func(format string, args ...any) {
		fmt.Printf(format+"\n", args...)
	})
	c, err := kindtest.New(context.Background(),
		kindtest.WithoutKubernetes(), kindtest.WithWorkers(1),
		kindtest.WithNamePrefix("child"), kindtest.WithLogger(log))
	if err != nil {
		fmt.Println("child: create failed:", err)
		return 1
	}
	fmt.Println("child: created", c.Name())
	time.Sleep(10 * time.Minute)
	return 0
}
