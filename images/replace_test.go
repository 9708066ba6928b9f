package images

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/enginetest"
)

// TestReplaceImage: rebuilding an image under its tag removes the image
// the tag named before, unless that image has another name.
func TestReplaceImage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli := enginetest.Client(t)
	ref := "kindtest-test/replace-" + uuid.NewString()[:8] + ":v1"
	kept := ref + "-kept"
	t.Cleanup(func() {
		for _, r := range []string{ref, kept} {
			_ = cli.RemoveImage(context.Background(), r)
		}
	})
	// build makes a one-file image under ref; content tells images apart.
	build := func(content string) string {
		t.Helper()
		var oldID string
		if img, err := cli.InspectImage(ctx, ref); err == nil {
			oldID = img.ID
		} else if !docker.IsNotFound(err) {
			t.Fatal(err)
		}
		if err := replaceImage(ctx, cli, ref, oldID, testLogger{t}, func() error {
			tarStream := contextTar([]tarFile{
				{name: "Dockerfile", data: []byte("FROM scratch\nCOPY file /file\n"), mode: 0o644},
				{name: "file", data: []byte(content), mode: 0o644},
			})
			defer tarStream.Close()
			return cli.BuildImage(ctx, tarStream, docker.BuildSpec{Tags: []string{ref}}, nil)
		}); err != nil {
			t.Fatal(err)
		}
		img, err := cli.InspectImage(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		return img.ID
	}
	first := build("one")
	if again := build("one"); again != first {
		t.Fatalf("the same build gave %s, then %s", first, again)
	}
	if _, err := cli.InspectImage(ctx, first); err != nil {
		t.Fatalf("an image rebuilt unchanged was removed: %v", err)
	}
	second := build("two")
	if _, err := cli.InspectImage(ctx, first); !docker.IsNotFound(err) {
		t.Errorf("the image %s that %s named before is still there (%v)", first, ref, err)
	}
	if err := cli.TagImage(ctx, second, kept); err != nil {
		t.Fatal(err)
	}
	build("three")
	if img, err := cli.InspectImage(ctx, kept); err != nil || img.ID != second {
		t.Errorf("%s, another name of the replaced image: %s %v, want %s kept", kept, img.ID, err, second)
	}
}
