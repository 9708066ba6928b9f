package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
)

// ReaperImage is the reference BuildReaper tags the reaper image with; the
// kindtest package runs its reaper containers from it. The tag is the
// reaper protocol's version.
const ReaperImage = "kindtest/reaper:v2"

// labelBinaryHash on the reaper image holds the SHA-256 of its binary.
const labelBinaryHash = "io.kindtest.binary-hash"

// BuildReaper builds the reaper image: the kindtest command, built from the
// checkout's root module, alone in an image FROM scratch. The Go build is
// cached; the image is rebuilt only when the binary changed.
func BuildReaper(ctx context.Context, opts ...BuildOption) error {
	start := time.Now()
	cfg, err := newBuildConfig(opts)
	if err != nil {
		return err
	}
	dir := filepath.Join(cfg.cacheDir, "reaper")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("build reaper image: %w", err)
	}
	bin := filepath.Join(dir, "kindtest")
	root := filepath.Dir(cfg.sourceDir)
	if err := command(ctx, root, goEnv, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/kindtest"); err != nil {
		return fmt.Errorf("build reaper image: %w", err)
	}
	sum, err := fileSHA256(bin)
	if err != nil {
		return fmt.Errorf("build reaper image: %w", err)
	}
	cli, err := docker.New(ctx)
	if err != nil {
		return fmt.Errorf("build reaper image: %w", err)
	}
	defer cli.Close()
	if img, err := cli.InspectImage(ctx, ReaperImage); err == nil && img.Labels[labelBinaryHash] == sum {
		cfg.logger.Printf("reaper image %s is up to date (%s)", ReaperImage, time.Since(start).Round(time.Millisecond))
		return nil
	}
	dockerfile := "FROM scratch\nCOPY kindtest /kindtest\nENTRYPOINT [\"/kindtest\"]\n"
	tarStream := contextTar([]tarFile{
		{name: "Dockerfile", data: []byte(dockerfile), mode: 0o644},
		{name: "kindtest", path: bin, mode: 0o755},
	})
	defer tarStream.Close()
	if err := cli.BuildImage(ctx, tarStream, docker.BuildSpec{
		Tags:   []string{ReaperImage},
		Labels: map[string]string{labelBinaryHash: sum},
	}, nil); err != nil {
		return fmt.Errorf("build reaper image: %w", err)
	}
	cfg.logger.Printf("reaper image %s built in %s", ReaperImage, time.Since(start).Round(time.Millisecond))
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
