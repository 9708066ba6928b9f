//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kindtest/kindtest/internal/docker"
)

// baseDisk is the cached guest: a raw ext4 disk and the kernel and initrd
// to boot it with.
type baseDisk struct {
	Key, Disk, Kernel, Initrd string
}

// baseKey names the base disk: the recipe and the files added to it.
func baseKey(r recipe) string {
	parts := []string{r.key()}
	for _, m := range []map[string]string{guestFiles, guestLinks} {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			parts = append(parts, k, m[k])
		}
	}
	return digest(parts...)
}

// diskSize is the base disk's size; it is sparse, and the prepared and
// per-run layers are copy-on-write on top of it.
const diskSize = "24G"

// ensureBase builds what is missing of r's rootfs tar, disk, kernel and
// initrd.
func ensureBase(ctx context.Context, cache string, r recipe, out io.Writer) (baseDisk, error) {
	rootfs := filepath.Join(cache, "rootfs-"+r.key()+".tar")
	key := baseKey(r)
	b := baseDisk{
		Key:    key,
		Disk:   filepath.Join(cache, "base-"+key+".img"),
		Kernel: filepath.Join(cache, "vmlinuz-"+key),
		Initrd: filepath.Join(cache, "initrd-"+key),
	}
	if fileExists(b.Disk) && fileExists(b.Kernel) && fileExists(b.Initrd) {
		logf(out, "guest disk %s is cached", b.Disk)
		return b, nil
	}
	if !fileExists(rootfs) {
		if r.arch() == "amd64" {
			logf(out, "building the guest's root file system with mmdebstrap (about 15 minutes)")
		} else {
			logf(out, "building the %s guest's root file system with mmdebstrap, its package scripts under qemu-user emulation (about 30 minutes)", r.arch())
		}
		tmp := rootfs + ".partial"
		os.Remove(tmp)
		if err := run(ctx, prefixed(out, "mmdebstrap| "), "mmdebstrap", r.mmdebstrapArgs(tmp)...); err != nil {
			os.Remove(tmp)
			return b, err
		}
		if err := os.Rename(tmp, rootfs); err != nil {
			return b, err
		}
	}
	dir, err := os.MkdirTemp(cache, "rootfs-")
	if err != nil {
		return b, err
	}
	defer os.RemoveAll(dir)
	if err := run(ctx, out, "tar", "-C", dir, "--numeric-owner", "-xpf", rootfs); err != nil {
		return b, err
	}
	for name, content := range guestFiles {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return b, err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return b, err
		}
	}
	for name, target := range guestLinks {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return b, err
		}
		os.Remove(p)
		if err := os.Symlink(target, p); err != nil {
			return b, err
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "mnt", "share"), 0o755); err != nil {
		return b, err
	}
	// An empty root password, for whoever logs in on the console to debug.
	if err := emptyRootPassword(filepath.Join(dir, "etc", "shadow")); err != nil {
		return b, err
	}
	for dst, pattern := range map[string]string{b.Kernel: "vmlinuz-*", b.Initrd: "initrd.img-*"} {
		m, _ := filepath.Glob(filepath.Join(dir, "boot", pattern))
		if len(m) != 1 {
			return b, fmt.Errorf("guest root file system: want one /boot/%s, found %v (is linux-image-%s in the recipe?)", pattern, m, r.arch())
		}
		if err := copyFile(m[0], dst+".partial"); err != nil {
			return b, err
		}
		if err := os.Rename(dst+".partial", dst); err != nil {
			return b, err
		}
	}
	tmp := b.Disk + ".partial"
	os.Remove(tmp)
	if err := run(ctx, out, "truncate", "-s", diskSize, tmp); err != nil {
		return b, err
	}
	if err := run(ctx, out, "mkfs.ext4", "-q", "-F", "-L", "v2guest", "-d", dir, tmp); err != nil {
		os.Remove(tmp)
		return b, err
	}
	return b, os.Rename(tmp, b.Disk)
}

func emptyRootPassword(shadow string) error {
	data, err := os.ReadFile(shadow)
	if err != nil {
		return err
	}
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		if f := strings.SplitN(l, ":", 3); len(f) == 3 && f[0] == "root" {
			lines[i] = "root::" + f[2]
		}
	}
	return os.WriteFile(shadow, []byte(strings.Join(lines, "\n")), 0o640)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	o, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(o, in); err != nil {
		o.Close()
		return err
	}
	return o.Close()
}

// ensurePrepared returns a disk layer (qcow2 over the base) whose Docker
// holds the images, booting the guest once to load them when it is not
// cached. ids ("ref=image ID") name it; the guest tags each image as tags
// names it (host ref: guest ref) and removes the host's name.
func ensurePrepared(ctx context.Context, o options, dc *docker.Client, base baseDisk, refs, ids []string, tags map[string]string, tm *timings, out io.Writer) (string, error) {
	prepared := filepath.Join(o.cache, "prepared-"+digest(append([]string{base.Key}, ids...)...)+".qcow2")
	if fileExists(prepared) {
		logf(out, "guest disk with the images loaded %s is cached", prepared)
		return prepared, nil
	}
	work, err := os.MkdirTemp(o.cache, "prepare-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	share := filepath.Join(work, "share")
	if err := os.MkdirAll(filepath.Join(share, "images"), 0o755); err != nil {
		return "", err
	}
	if err := tm.phase(out, "docker save on the host", func() error {
		return saveImages(ctx, dc, refs, filepath.Join(share, "images", "images.tar"))
	}); err != nil {
		return "", err
	}
	if err := writeShare(share, map[string]string{"MODE": "prepare", "TAGS": tagPairs(tags)}); err != nil {
		return "", err
	}
	layer := filepath.Join(work, "prepared.qcow2")
	if err := run(ctx, out, "qemu-img", "create", "-q", "-f", "qcow2", "-F", "raw", "-b", base.Disk, layer); err != nil {
		return "", err
	}
	if err := tm.phase(out, "guest: load images", func() error {
		return bootGuest(ctx, o, base, layer, share, filepath.Join(o.cache, "prepare-console.log"), out)
	}); err != nil {
		return "", err
	}
	readGuestTimings(share, "load images: ", tm)
	if !fileExists(filepath.Join(share, "prepared.ok")) {
		return "", fmt.Errorf("the guest powered off without loading the images (console: %s)", filepath.Join(o.cache, "prepare-console.log"))
	}
	return prepared, os.Rename(layer, prepared)
}

// tagPairs renders the guest's tags as "from=to" words, in a stable order.
func tagPairs(tags map[string]string) string {
	var pairs []string
	for from, to := range tags {
		pairs = append(pairs, from+"="+to)
	}
	slices.Sort(pairs)
	return strings.Join(pairs, " ")
}

func saveImages(ctx context.Context, dc *docker.Client, refs []string, dst string) error {
	rc, err := dc.SaveImages(ctx, refs)
	if err != nil {
		return err
	}
	defer rc.Close()
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, rc); err != nil {
		f.Close()
		return fmt.Errorf("save images: %w", err)
	}
	return f.Close()
}

// writeShare puts the guest script and its settings into the share.
func writeShare(share string, env map[string]string) error {
	if err := os.WriteFile(filepath.Join(share, "guest.sh"), []byte(guestScript), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(share, "env"), []byte(envFile(env)), 0o644)
}

// envFile renders settings as shell assignments, single-quoted.
func envFile(env map[string]string) string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s='%s'\n", k, strings.ReplaceAll(env[k], "'", `'\''`))
	}
	return b.String()
}

// bootGuest boots the guest on disk with share, and on failure adds the
// console's last lines to the error.
func bootGuest(ctx context.Context, o options, base baseDisk, disk, share, consoleLog string, out io.Writer) error {
	console, err := os.Create(consoleLog)
	if err != nil {
		return err
	}
	defer console.Close()
	v := vm{Kernel: base.Kernel, Initrd: base.Initrd, Disk: disk, Share: share, MemoryMiB: o.memory, CPUs: o.cpus, Accel: o.accel, Arch: o.arch, KernelArgs: o.kernelArgs}
	tail, err := v.boot(ctx, o.bootLimit, o.runLimit, console, out)
	if err != nil {
		return fmt.Errorf("%w\nlast console lines (all of them in %s):\n%s", err, consoleLog, indent(tail))
	}
	return nil
}

func indent(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("    " + l + "\n")
	}
	return b.String()
}

// readGuestTimings adds the phases the guest recorded in timings.txt.
func readGuestTimings(share, prefix string, tm *timings) {
	data, err := os.ReadFile(filepath.Join(share, "timings.txt"))
	if err != nil {
		return
	}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		if d, err := time.ParseDuration(f[1] + "s"); err == nil {
			tm.add(prefix+f[0], d)
		}
	}
}

// prefixed writes each line it is given to out with a prefix.
func prefixed(out io.Writer, prefix string) io.Writer {
	return &prefixWriter{out: out, prefix: prefix}
}

type prefixWriter struct {
	out    io.Writer
	prefix string
	buf    []byte
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := slices.Index(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		fmt.Fprintf(w.out, "%s%s\n", w.prefix, w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}
