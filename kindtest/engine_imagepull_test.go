package kindtest_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"

	"github.com/kindtest/kindtest/internal/fixture"
	"github.com/kindtest/kindtest/kindtest"
)

// neverPulledPod is a pod of image on node that the kubelet must never
// pull: it runs from what is on the node, or fails with ErrImageNeverPull.
func neverPulledPod(name, image, node string) []byte {
	return fmt.Appendf(nil, `apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 0
  nodeName: %s
  containers:
  - name: main
    image: %s
    imagePullPolicy: Never
`, name, node, image)
}

// alwaysPulledPod is a pod of image on node that the kubelet pulls
// whatever the node has.
func alwaysPulledPod(name, image, node string) []byte {
	return fmt.Appendf(nil, `apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 0
  nodeName: %s
  containers:
  - name: main
    image: %s
    imagePullPolicy: Always
`, name, node, image)
}

// TestLoadedImageAfterRegistryPull: an image loaded with LoadImage stays
// usable by pods with imagePullPolicy Never after the kubelet has pulled
// the same image (same ID, another name) from the cluster's registry. With
// the kubelet's default credential policy of 1.37 the loaded name stops
// counting as preloaded once the kubelet pulled that ID itself, and such
// pods fail with ErrImageNeverPull.
func TestLoadedImageAfterRegistryPull(t *testing.T) {
	dc := engine(t)
	ctx := t.Context()
	echo, err := fixture.BuildEcho(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	loaded := fmt.Sprintf("heldout/echo:dev-%x", suffix)
	if err := dc.TagImage(ctx, echo, loaded); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dc.RemoveImage(context.Background(), loaded) })
	c := start(t, dc, kindtest.WithWorkers(1), kindtest.WithRegistry())
	if err := c.LoadImage(ctx, loaded); err != nil {
		t.Fatal(err)
	}
	pushed := c.RegistryAddr() + "/echo:1"
	if err := dc.TagImage(ctx, echo, pushed); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dc.RemoveImage(context.Background(), pushed) })
	if err := dc.PushImage(ctx, pushed, nil); err != nil {
		t.Fatalf("push to the cluster's registry: %v", err)
	}
	// The kubelet of every node pulls the image ID itself.
	for i, n := range c.Nodes() {
		pod := fmt.Sprintf("pulled-%d", i)
		if err := c.Apply(ctx, alwaysPulledPod(pod, pushed, n.Name())); err != nil {
			t.Fatal(err)
		}
		waitPodReady(ctx, t, c, pod)
	}
	if err := c.LoadImage(ctx, loaded); err != nil {
		t.Fatal(err)
	}
	for i, n := range c.Nodes() {
		pod := fmt.Sprintf("loaded-%d", i)
		if err := c.Apply(ctx, neverPulledPod(pod, loaded, n.Name())); err != nil {
			t.Fatal(err)
		}
		waitPodReady(ctx, t, c, pod)
	}
}
