package kindtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kindtest/kindtest/internal/bootstrap"
)

// Condition is what Wait waits for.
type Condition string

// Conditions Wait knows.
const (
	// Available: a Deployment, StatefulSet or DaemonSet has rolled out
	// (kubectl rollout status); any other object has the condition
	// Available.
	Available Condition = "Available"
	// Ready: the object (a Pod, a Node) has the condition Ready.
	Ready Condition = "Ready"
	// Complete: a Job has completed; a Job that fails ends the wait with
	// an error at once.
	Complete Condition = "Complete"
	// Deleted: the object is gone (at once when it does not exist).
	Deleted Condition = "Deleted"
	// HasAddress: a Service of type LoadBalancer has an address in its
	// status (see WithoutLoadBalancer).
	HasAddress Condition = "HasAddress"
)

// defaultWaitTimeout bounds Wait when ctx has no deadline.
const defaultWaitTimeout = 5 * time.Minute

// WaitError reports a Wait that did not see its condition, with what the
// object showed then.
type WaitError struct {
	Namespace string
	Object    string
	Condition Condition
	Err       error
	// Diagnostics is the object's description (status, conditions, its
	// events) and the namespace's last events, capped at 8 KiB.
	Diagnostics string
}

// Error names the object and condition, then the cause and diagnostics.
func (e *WaitError) Error() string {
	cause := fmt.Sprint(e.Err)
	var ee *ExitError
	if errors.As(e.Err, &ee) {
		// What kubectl said; the command line is in Err.
		cause = fmt.Sprintf("kubectl exited %d", ee.ExitCode)
		if s := strings.TrimSpace(ee.Stderr); s != "" {
			cause = s
		}
	}
	s := fmt.Sprintf("wait for %s in namespace %s to be %s: %s", e.Object, e.Namespace, e.Condition, cause)
	if e.Diagnostics != "" {
		s += "\n" + e.Diagnostics
	}
	return s
}

// Unwrap returns the cause.
func (e *WaitError) Unwrap() error { return e.Err }

// rolloutKinds are what kubectl rollout status follows.
var rolloutKinds = map[string]bool{
	"deployment": true, "deployments": true, "deploy": true,
	"statefulset": true, "statefulsets": true, "sts": true,
	"daemonset": true, "daemonsets": true, "ds": true,
}

// Wait waits until object ("deployment/web", "pod/web-0", "job/migrate",
// "node/NAME"...) in namespace ("" is default) meets cond, running kubectl
// in the control-plane node. It waits until ctx ends, or for 5 minutes
// when ctx has no deadline. A wait that does not succeed returns a
// *WaitError with the object's status, conditions and recent events.
func (c *Cluster) Wait(ctx context.Context, namespace, object string, cond Condition) error {
	if err := c.usable("wait"); err != nil {
		return err
	}
	kind, _, err := parseTarget(object)
	if err != nil {
		return fmt.Errorf("wait: %w", err)
	}
	if namespace == "" {
		namespace = "default"
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultWaitTimeout)
		defer cancel()
	}
	d, _ := ctx.Deadline()
	// kubectl gives up a moment before ctx ends, so that it says why and
	// there is time left to describe the object (kubectl itself may take
	// seconds to start on a loaded machine).
	left := time.Until(d)
	timeout := max(left-min(5*time.Second, left/3), time.Second)
	t := fmt.Sprintf("%ds", int(timeout.Round(time.Second)/time.Second))
	var args []string
	switch cond {
	case Available:
		if rolloutKinds[kind] {
			args = []string{"rollout", "status", object, "-n", namespace, "--timeout=" + t}
		} else {
			args = []string{"wait", "--for=condition=Available", object, "-n", namespace, "--timeout=" + t}
		}
	case Ready:
		args = []string{"wait", "--for=condition=Ready", object, "-n", namespace, "--timeout=" + t}
	case Deleted:
		args = []string{"wait", "--for=delete", object, "-n", namespace, "--timeout=" + t}
	case HasAddress:
		args = []string{"wait", "--for=jsonpath={.status.loadBalancer.ingress[0].ip}", object, "-n", namespace, "--timeout=" + t}
	case Complete:
	default:
		return fmt.Errorf("wait for %s: unknown condition %q: use Available, Ready, Complete, Deleted or HasAddress", object, cond)
	}
	if cond == Complete {
		_, err = c.ControlPlane().Exec(ctx, bootstrap.WaitJobCommand(adminKubeconfig, object, namespace, t)...)
	} else {
		_, err = c.Kubectl(ctx, args...)
	}
	if err == nil {
		return nil
	}
	return &WaitError{Namespace: namespace, Object: object, Condition: cond, Err: err, Diagnostics: c.describe(namespace, object)}
}

// maxDiagnostics caps what describe returns.
const maxDiagnostics = 8 << 10

// describe is what a failed wait shows: the object as kubectl describes
// it (status, conditions, its events) and the namespace's last events.
func (c *Cluster) describe(namespace, object string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var b strings.Builder
	if res, err := c.Kubectl(ctx, "describe", "-n", namespace, object); err == nil {
		fmt.Fprintf(&b, "kubectl describe %s:\n%s", object, indent(tail(res.Stdout, maxDiagnostics*3/4)))
	} else {
		fmt.Fprintf(&b, "kubectl describe %s: %v\n", object, err)
	}
	if res, err := c.Kubectl(ctx, "get", "events", "-n", namespace, "--sort-by=.lastTimestamp"); err == nil && strings.TrimSpace(res.Stdout) != "" {
		lines := strings.Split(strings.TrimRight(res.Stdout, "\n"), "\n")
		if len(lines) > 16 {
			lines = append(lines[:1], lines[len(lines)-15:]...)
		}
		fmt.Fprintf(&b, "last events in namespace %s:\n%s", namespace, indent(tail(strings.Join(lines, "\n"), maxDiagnostics/4)))
	}
	return strings.TrimRight(b.String(), "\n")
}
