package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/kindtest"
)

// markMirrored sets Mirror on the built images that the files of the
// specs pulling with Always name (imageUsers): those are pushed to the
// cluster's registry, which every node pulls their registry's images
// from first. A file's other images are pushed too (its specs' BusyBox),
// as imageUsers counts per file; images that only load do no harm there.
func markMirrored(plans []imagePlan, pullAlways []conformanceSpec) {
	for i, p := range plans {
		if !p.Built || docker.RegistryHost(p.Ref) == "" {
			continue
		}
		for _, s := range pullAlways {
			if slices.ContainsFunc(p.Users, func(u fileUse) bool { return u.File == s.File }) {
				plans[i].Mirror = true
				break
			}
		}
	}
}

// mirrorOptions are the cluster options that serve the mirrored images:
// the cluster's registry, as a mirror of each registry they name
// (registry.k8s.io). None when no image is mirrored: the cluster is then
// made without a registry.
func mirrorOptions(plans []imagePlan) []kindtest.Option {
	var hosts []string
	for _, p := range plans {
		if h := docker.RegistryHost(p.Ref); p.Mirror && !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) == 0 {
		return nil
	}
	opts := []kindtest.Option{kindtest.WithRegistry()}
	for _, h := range hosts {
		opts = append(opts, kindtest.WithRegistryMirror(h, kindtest.RegistryEndpoint))
	}
	return opts
}

// mirrorRef is where ref is pushed in the cluster's registry at addr
// (localhost:PORT) for containerd to find it there when it pulls ref: a
// mirror is asked for the repository path without the registry's name
// (registry.k8s.io/e2e-test-images/kitten:1.8 as
// /v2/e2e-test-images/kitten/manifests/1.8, with ?ns=registry.k8s.io,
// which the registry ignores).
func mirrorRef(addr, ref string) string {
	return addr + "/" + strings.TrimPrefix(ref, docker.RegistryHost(ref)+"/")
}

// pushMirrored pushes the mirrored images to the cluster's registry at
// addr through the engine (which takes localhost for a plain-HTTP
// registry), and removes the tags it made for that.
func pushMirrored(ctx context.Context, cli *docker.Client, log logger, addr string, plans []imagePlan) error {
	start := time.Now()
	var pushed []string
	for _, p := range plans {
		if !p.Mirror {
			continue
		}
		ref := mirrorRef(addr, p.Ref)
		if err := cli.TagImage(ctx, p.Ref, ref); err != nil {
			return err
		}
		err := cli.PushImage(ctx, ref, nil)
		// The image keeps its own reference; only this tag goes.
		if rerr := cli.RemoveImage(context.WithoutCancel(ctx), ref); err == nil {
			err = rerr
		}
		if err != nil {
			return err
		}
		pushed = append(pushed, p.Ref)
	}
	if len(pushed) > 0 {
		log.Printf("pushed %d images to the cluster's registry %s, the nodes' mirror of their registry, in %s: %s",
			len(pushed), addr, time.Since(start).Round(100*time.Millisecond), strings.Join(pushed, ", "))
	}
	return nil
}

// writeMirrorReport names the specs that pull with Always and the images
// the cluster's registry serves them; nothing when none was selected.
func writeMirrorReport(w io.Writer, pullAlways []conformanceSpec, plans []imagePlan) {
	if len(pullAlways) == 0 {
		return
	}
	var refs []string
	for _, p := range plans {
		if p.Mirror {
			refs = append(refs, p.Ref)
		}
	}
	serves := "none of their images, as none is built"
	if len(refs) > 0 {
		serves = strings.Join(refs, ", ")
	}
	fmt.Fprintf(w, "%d selected conformance specs pull with imagePullPolicy Always; the cluster's registry, their registry's mirror on every node, serves %s:\n", len(pullAlways), serves)
	for _, s := range pullAlways {
		fmt.Fprintf(w, "  %s\n", s.Codename)
	}
}
