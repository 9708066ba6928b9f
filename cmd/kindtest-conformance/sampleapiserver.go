package main

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/kindtest/kindtest/images"
)

// sampleAPIServerModule is the module of the sample API server that the
// Aggregator spec (test/e2e/apimachinery/aggregator.go) registers as an
// aggregated API server, from the image sample-apiserver:1.X.Y.
const sampleAPIServerModule = "k8s.io/sample-apiserver"

// sampleAPIServerDir is the nested module, under conformance/, that
// builds it at the version the e2e framework's image tag names.
const sampleAPIServerDir = "sample-apiserver"

// sampleAPIServerVersion is the release of k8s.io/sample-apiserver that
// an image tag is built from here: the same minor and patch,
// sample-apiserver:1.29.2 from v0.29.2. Upstream's recipe
// (test/images/sample-apiserver/Makefile) checks out a tag of the module
// that its VERSION does not always spell so: in v1.37.2, VERSION 1.33.8
// checks out v0.33.7. Which tag made 1.29.2 is not in the module.
func sampleAPIServerVersion(tag string) string {
	return images.StagingVersion("v" + tag)
}

// goPlatformEnv is the go command's environment that builds for an image
// platform ("linux/amd64", "linux/arm/v7").
func goPlatformEnv(platform string) ([]string, error) {
	parts := strings.Split(platform, "/")
	if len(parts) < 2 || parts[0] != "linux" {
		return nil, fmt.Errorf("platform %q: want linux/ARCH", platform)
	}
	env := []string{"GOOS=linux", "GOARCH=" + parts[1]}
	if parts[1] == "arm" && len(parts) == 3 {
		env = append(env, "GOARM="+strings.TrimPrefix(parts[2], "v"))
	}
	return env, nil
}

// sampleAPIServerBinary returns the path of the sample API server built
// for the node image's platform from the nested module, static
// (CGO_ENABLED=0), as upstream's Makefile builds it, without symbol
// tables. It is kept beside the other binaries, named for its recipe (the
// module's go.mod and go.sum, the flags, the Go version, the platform),
// and built again only when that changes.
func (ib *imageBuilder) sampleAPIServerBinary(ctx context.Context) (string, error) {
	env, err := goPlatformEnv(ib.platform)
	if err != nil {
		return "", err
	}
	flags := []string{"-trimpath", "-ldflags=-s -w"}
	recipe := append([]string{ib.platform, runtime.Version()}, flags...)
	for _, name := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(ib.sampleModule, name))
		if err != nil {
			return "", err
		}
		recipe = append(recipe, name, string(data))
	}
	out := filepath.Join(ib.bins.dir, "sample-apiserver-"+hashStrings(recipe...)[:12])
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	start := time.Now()
	ib.log.Printf("  building %s for %s in %s (a few minutes the first time)", sampleAPIServerModule, ib.platform, ib.sampleModule)
	args := append(append([]string{"build"}, flags...), "-o", out+".tmp", sampleAPIServerModule)
	if err := goCommandEnv(ctx, ib.sampleModule, ib.nice, env, args...); err != nil {
		return "", err
	}
	ib.log.Printf("  built the sample API server in %s", time.Since(start).Round(time.Second))
	return out, os.Rename(out+".tmp", out)
}

// sampleAPIServer builds the sample-apiserver image as upstream's
// Dockerfile lays it out: the program at /sample-apiserver, its
// entrypoint, run as root; on a minimal root file system (the program,
// /tmp, root's passwd and group entries) instead of Alpine, whose
// programs the Aggregator spec does not run. The spec passes it its
// flags (--etcd-servers, the TLS files of a secret it mounts, the audit
// log on standard output) and probes its /readyz on 443, the server's
// default secure port.
func (ib *imageBuilder) sampleAPIServer(ctx context.Context, ref string) error {
	bin, err := ib.sampleAPIServerBinary(ctx)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	changes := []string{`ENTRYPOINT ["/sample-apiserver"]`}
	recipe := hashStrings(append([]string{string(data), ib.platform}, changes...)...)
	if ok, err := ib.upToDate(ctx, ref, recipe); err != nil || ok {
		if ok {
			ib.log.Printf("  %s is up to date", ref)
		}
		return err
	}
	var buf bytes.Buffer
	if err := sampleAPIServerTar(&buf, data); err != nil {
		return err
	}
	ib.log.Printf("  building %s (%s, %d MB)", ref, ib.platform, len(data)>>20)
	return ib.cli.ImportImageFor(ctx, &buf, ref, ib.platform, append(changes, "LABEL "+recipeLabel+"="+recipe))
}

// sampleAPIServerTar writes the sample-apiserver image's root file system.
func sampleAPIServerTar(w io.Writer, program []byte) error {
	tw := tar.NewWriter(w)
	for _, d := range []struct {
		name string
		mode int64
	}{{"etc", 0o755}, {"root", 0o700}, {"tmp", 0o1777}} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d.name + "/", Mode: d.mode}); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{
		{"sample-apiserver", 0o755, program},
		{"etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/:/sbin/nologin\n")},
		{"etc/group", 0o644, []byte("root:x:0:root\nnobody:x:65534:\n")},
	} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data))}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	return tw.Close()
}
