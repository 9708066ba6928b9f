package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/kindtest/kindtest/internal/docker"
)

// recipeLabel, on an image this tool built, holds the hash of its recipe:
// an image whose label matches is up to date.
const recipeLabel = "dev.kindtest.conformance.recipe"

// mmdebstrapArgs are the options of every Debian root file system here,
// as the node image builder's: no documentation, no locales.
var mmdebstrapArgs = []string{
	"--dpkgopt=path-exclude=/usr/share/man/*",
	"--dpkgopt=path-exclude=/usr/share/doc/*",
	"--dpkgopt=path-include=/usr/share/doc/*/copyright",
	"--dpkgopt=path-exclude=/usr/share/locale/*",
	"--dpkgopt=path-exclude=/usr/share/info/*",
}

// imageBuilder builds test images into the engine.
type imageBuilder struct {
	cli  *docker.Client
	log  logger
	bins binaries
	tmp  string
	// platform is the node image's ("linux/amd64"), which the images built
	// from Go modules alone are built for.
	platform string
	// sampleModule is the nested module that builds the sample API
	// server; nice the niceness of its compile.
	sampleModule string
	nice         int
}

// debianImage is an image made from a Debian root file system with
// mmdebstrap, and the image settings docker import applies.
type debianImage struct {
	suite    string
	packages []string
	// hooks are mmdebstrap --customize-hook scripts.
	hooks   []string
	changes []string
}

func (d debianImage) recipe() []string {
	return append(append(append([]string{d.suite}, d.packages...), d.hooks...), d.changes...)
}

// upToDate reports whether ref exists with the recipe's label.
func (ib *imageBuilder) upToDate(ctx context.Context, ref, recipe string) (bool, error) {
	img, err := ib.cli.InspectImage(ctx, ref)
	if docker.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return img.Labels[recipeLabel] == recipe, nil
}

// buildDebian makes ref from d, unless it is up to date.
func (ib *imageBuilder) buildDebian(ctx context.Context, ref string, d debianImage, extra ...string) error {
	// The hooks name files under the temporary directory, which differs
	// from run to run; what those files hold is in extra.
	parts := append(d.recipe(), extra...)
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(p, ib.tmp, "$TMP")
	}
	recipe := hashStrings(parts...)
	if ok, err := ib.upToDate(ctx, ref, recipe); err != nil || ok {
		if ok {
			ib.log.Printf("  %s is up to date", ref)
		}
		return err
	}
	out := filepath.Join(ib.tmp, strings.NewReplacer("/", "_", ":", "_").Replace(ref)+".tar")
	defer os.Remove(out)
	args := []string{"--variant=minbase", "--include=" + strings.Join(d.packages, ",")}
	args = append(args, mmdebstrapArgs...)
	if os.Geteuid() != 0 {
		args = append(args, "--mode=unshare")
	}
	for _, h := range d.hooks {
		args = append(args, "--customize-hook="+h)
	}
	args = append(args, d.suite, out)
	ib.log.Printf("  building %s with mmdebstrap (%s: %s)", ref, d.suite, strings.Join(d.packages, " "))
	if err := runProgram(ctx, ib.tmp, "mmdebstrap", args...); err != nil {
		return err
	}
	f, err := os.Open(out)
	if err != nil {
		return err
	}
	defer f.Close()
	return ib.cli.ImportImage(ctx, f, ref, append(d.changes, "LABEL "+recipeLabel+"="+recipe))
}

// agnhost builds the agnhost image from the agnhost binary of the module
// (test/images/agnhost at the e2e tests' own version) on Debian instead of
// Alpine, with the Debian packages of the tools its Dockerfile adds
// (bind-tools, curl, netcat-openbsd, iproute2, iperf, bash, util-linux,
// socat), its porter certificates, /uploads, the agnhost-2 link and the
// user and group the image defines.
func (ib *imageBuilder) agnhost(ctx context.Context, ref string) error {
	d, extra, err := ib.agnhostImage()
	if err != nil {
		return err
	}
	return ib.buildDebian(ctx, ref, d, extra...)
}

// agnhostImage is the recipe of the agnhost image, and the hash of the
// binary it copies in.
func (ib *imageBuilder) agnhostImage() (debianImage, []string, error) {
	src := filepath.Join(ib.bins.kubernetesDir, "test", "images", "agnhost")
	stage := filepath.Join(ib.tmp, "agnhost")
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return debianImage{}, nil, err
	}
	for _, f := range []struct{ from, to string }{
		{ib.bins.path("agnhost"), "agnhost"},
		{filepath.Join(src, "porter", "localhost.crt"), "localhost.crt"},
		{filepath.Join(src, "porter", "localhost.key"), "localhost.key"},
	} {
		if err := copyFile(f.from, filepath.Join(stage, f.to)); err != nil {
			return debianImage{}, nil, err
		}
	}
	bin, err := os.ReadFile(ib.bins.path("agnhost"))
	if err != nil {
		return debianImage{}, nil, err
	}
	d := debianImage{
		suite:    "bookworm",
		packages: []string{"dnsutils", "curl", "ca-certificates", "netcat-openbsd", "iproute2", "iperf", "bash", "util-linux", "socat", "passwd"},
		hooks: []string{
			"copy-in " + filepath.Join(stage, "agnhost") + " " + filepath.Join(stage, "localhost.crt") + " " + filepath.Join(stage, "localhost.key") + " /",
			`chroot "$1" sh -ec 'chmod 0755 /agnhost; chmod 0644 /localhost.crt /localhost.key; ln -s agnhost /agnhost-2; ln -s /usr/bin/iperf /usr/local/bin/iperf; mkdir /uploads; groupadd -g 50000 group-defined-in-image; useradd -u 1000 -M -N -s /bin/sh user-defined-in-image; usermod -a -G group-defined-in-image user-defined-in-image'`,
		},
		changes: []string{`ENTRYPOINT ["/agnhost"]`, `CMD ["pause"]`, "EXPOSE 80 8080 8081 9376 5000", "WORKDIR /"},
	}
	return d, []string{hashStrings(string(bin))}, nil
}

// webImage builds the kitten or nautilus image (name) as its Dockerfile
// does: the agnhost image with the picture and data.json of
// test/images/NAME/html in its working directory, serving them with
// agnhost's test-webserver.
func (ib *imageBuilder) webImage(ctx context.Context, ref, name string) error {
	d, extra, err := ib.agnhostImage()
	if err != nil {
		return err
	}
	html := filepath.Join(ib.bins.kubernetesDir, "test", "images", name, "html")
	var files []string
	for _, f := range []string{name + ".jpg", "data.json"} {
		to := filepath.Join(ib.tmp, name+"-"+f)
		if err := copyFile(filepath.Join(html, f), to); err != nil {
			return err
		}
		data, err := os.ReadFile(to)
		if err != nil {
			return err
		}
		extra = append(extra, hashStrings(f, string(data)))
		files = append(files, to)
	}
	d.hooks = append(d.hooks,
		"copy-in "+strings.Join(files, " ")+" /",
		fmt.Sprintf(`chroot "$1" sh -ec 'mv /%[1]s-%[1]s.jpg /%[1]s.jpg; mv /%[1]s-data.json /data.json; chmod 0644 /%[1]s.jpg /data.json'`, name))
	d.changes = append(d.changes, `CMD ["test-webserver"]`)
	return ib.buildDebian(ctx, ref, d, extra...)
}

// nginx builds a stand-in for the e2e nginx image (nginx:1.27-alpine
// upstream) from Debian's nginx-light: another nginx version, serving
// Debian's welcome page from /var/www/html on port 80, logging to the
// container's output as the official image does.
func (ib *imageBuilder) nginx(ctx context.Context, ref string) error {
	return ib.buildDebian(ctx, ref, debianImage{
		suite:    "bookworm",
		packages: []string{"nginx-light"},
		hooks:    []string{`chroot "$1" sh -ec 'ln -sf /dev/stdout /var/log/nginx/access.log; ln -sf /dev/stderr /var/log/nginx/error.log; mkdir -p /usr/share/nginx/html; cp /var/www/html/index.nginx-debian.html /usr/share/nginx/html/index.html'`},
		changes:  []string{`CMD ["nginx", "-g", "daemon off;"]`, "EXPOSE 80"},
	})
}

// nonroot builds the nonroot image as its Dockerfile does: Debian
// bookworm with USER 1234.
func (ib *imageBuilder) nonroot(ctx context.Context, ref string) error {
	return ib.buildDebian(ctx, ref, debianImage{suite: "bookworm", packages: []string{"bash"}, changes: []string{"USER 1234"}})
}

// nonewprivs builds the nonewprivs image: its program (nnp.go, built as
// nonewprivs) set-user-ID root at /usr/local/bin/nnp, on Debian bookworm
// instead of Alpine.
func (ib *imageBuilder) nonewprivs(ctx context.Context, ref string) error {
	stage := filepath.Join(ib.tmp, "nonewprivs")
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return err
	}
	if err := copyFile(ib.bins.path("nonewprivs"), filepath.Join(stage, "nnp")); err != nil {
		return err
	}
	bin, err := os.ReadFile(ib.bins.path("nonewprivs"))
	if err != nil {
		return err
	}
	return ib.buildDebian(ctx, ref, debianImage{
		suite:    "bookworm",
		packages: []string{"bash"},
		hooks: []string{
			"copy-in " + filepath.Join(stage, "nnp") + " /usr/local/bin",
			`chroot "$1" chmod 4755 /usr/local/bin/nnp`,
		},
		changes: []string{`CMD ["nnp"]`},
	}, hashStrings(string(bin)))
}

// glibcDNSTesting builds the glibc-dns-testing image as its Dockerfile
// does, Debian bookworm with dnsutils, without the CoreDNS 1.5.0 binary
// that the DNS specs' probes (dig, getent) do not run.
func (ib *imageBuilder) glibcDNSTesting(ctx context.Context, ref string) error {
	return ib.buildDebian(ctx, ref, debianImage{suite: "bookworm", packages: []string{"dnsutils"}})
}

// The BusyBox release the busybox image is built from: the upstream
// release tarball, as Debian's archive carries it (busybox_1.37.0.orig.tar.bz2),
// checked against the SHA-256 that Debian's busybox_1.37.0-6.dsc gives.
// Debian's own binaries will not do: Debian patches ash to drop
// environment variables whose names are not shell identifiers (unless
// built for the installer), which upstream ash passes on to the programs
// it runs, and the ConfigMap and Secret specs read "data-1=value-1" from
// `sh -c env`.
const (
	busyboxVersion = "1.37.0"
	busyboxSource  = "http://deb.debian.org/debian/pool/main/b/busybox/busybox_1.37.0.orig.tar.bz2"
	busyboxSHA256  = "3311dff32e746499f4df0d5df04d7eb396382d7e108bb9250e7b519b837043a4"
	// busyboxSuite is the Debian release of the compiler that builds it.
	busyboxSuite = "bookworm"
)

// busyboxBuild compiles BusyBox: defconfig, linked statically, without
// the SHA hardware acceleration whose assembly 1.37.0 builds unguarded.
const busyboxBuild = `cd /tmp && tar xjf busybox.tar.bz2 && cd busybox-` + busyboxVersion + ` && make defconfig >/dev/null && ` +
	`sed -i -e 's/^# CONFIG_STATIC is not set/CONFIG_STATIC=y/' -e 's/^CONFIG_SHA1_HWACCEL=y/# CONFIG_SHA1_HWACCEL is not set/' -e 's/^CONFIG_SHA256_HWACCEL=y/# CONFIG_SHA256_HWACCEL is not set/' .config && ` +
	`make -j"$(nproc)" busybox >/tmp/busybox-build.log 2>&1 || { tail -40 /tmp/busybox-build.log; exit 1; }`

// busyboxBinary returns the path of the upstream BusyBox binary, built
// once per recipe into the binaries' directory: the source downloaded and
// checked, then compiled in a Debian root file system with mmdebstrap.
func (ib *imageBuilder) busyboxBinary(ctx context.Context) (string, error) {
	out := filepath.Join(ib.bins.dir, "busybox-"+busyboxVersion+"-"+hashStrings(busyboxSHA256, busyboxSuite, busyboxBuild)[:12])
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	src := filepath.Join(ib.tmp, "busybox.tar.bz2")
	if err := download(ctx, busyboxSource, busyboxSHA256, src); err != nil {
		return "", fmt.Errorf("BusyBox %s source: %w", busyboxVersion, err)
	}
	ib.log.Printf("  compiling BusyBox %s from its release tarball (Debian %s, build-essential)", busyboxVersion, busyboxSuite)
	staged := filepath.Join(ib.tmp, "busybox-built")
	if err := os.MkdirAll(staged, 0o755); err != nil {
		return "", err
	}
	args := []string{"--variant=apt", "--include=build-essential,bzip2"}
	args = append(args, mmdebstrapArgs...)
	if os.Geteuid() != 0 {
		args = append(args, "--mode=unshare")
	}
	args = append(args,
		"--customize-hook=copy-in "+src+" /tmp",
		"--customize-hook=chroot \"$1\" sh -ec '"+strings.ReplaceAll(busyboxBuild, "'", `'\''`)+"'",
		"--customize-hook=copy-out /tmp/busybox-"+busyboxVersion+"/busybox "+staged,
		busyboxSuite, "/dev/null")
	if err := runProgram(ctx, ib.tmp, "mmdebstrap", args...); err != nil {
		return "", fmt.Errorf("compile BusyBox %s: %w", busyboxVersion, err)
	}
	if err := copyFile(filepath.Join(staged, "busybox"), out+".tmp"); err != nil {
		return "", err
	}
	if err := os.Chmod(out+".tmp", 0o755); err != nil {
		return "", err
	}
	return out, os.Rename(out+".tmp", out)
}

// download fetches url into path, failing unless its SHA-256 is sum.
func download(ctx context.Context, url, sum, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(f, h), resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		os.Remove(path)
		return fmt.Errorf("GET %s: SHA-256 %s, want %s", url, got, sum)
	}
	return nil
}

// busybox builds the busybox image as the official one is: the static
// busybox binary at /bin/busybox, a link for each applet beside it, and
// the official image's /etc/passwd and /etc/group. The binary is upstream
// BusyBox (busyboxBinary); the image is faithful when its release is the
// tag's (1.37.0 for busybox:1.37.0-2). It returns the release.
func (ib *imageBuilder) busybox(ctx context.Context, ref string) (string, error) {
	bin, err := ib.busyboxBinary(ctx)
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	banner, err := exec.CommandContext(ctx, bin).Output()
	if err != nil && len(banner) == 0 {
		return "", fmt.Errorf("run %s: %w", bin, err)
	}
	release := busyboxRelease(string(banner))
	list, err := exec.CommandContext(ctx, bin, "--list").Output()
	if err != nil {
		return "", fmt.Errorf("%s --list: %w", bin, err)
	}
	applets := strings.Fields(string(list))
	recipe := hashStrings(append([]string{string(data), busyboxPasswd, busyboxGroup}, applets...)...)
	if ok, err := ib.upToDate(ctx, ref, recipe); err != nil || ok {
		if ok {
			ib.log.Printf("  %s is up to date", ref)
		}
		return release, err
	}
	var buf bytes.Buffer
	if err := busyboxTar(&buf, data, applets); err != nil {
		return "", err
	}
	ib.log.Printf("  building %s from upstream BusyBox %s (%d applets)", ref, release, len(applets))
	return release, ib.cli.ImportImage(ctx, &buf, ref, []string{`CMD ["sh"]`, "LABEL " + recipeLabel + "=" + recipe})
}

// busyboxRelease reads "1.37.0" from busybox's banner, "BusyBox v1.37.0
// (Debian 1:1.37.0-6) multi-call binary.".
func busyboxRelease(banner string) string {
	fields := strings.Fields(banner)
	for i, f := range fields {
		if f == "BusyBox" && i+1 < len(fields) {
			return strings.TrimPrefix(fields[i+1], "v")
		}
	}
	return ""
}

// The official busybox image's /etc/passwd and /etc/group.
const (
	busyboxPasswd = "root:x:0:0:root:/root:/bin/sh\ndaemon:x:1:1:daemon:/usr/sbin:/bin/false\nbin:x:2:2:bin:/bin:/bin/false\nsys:x:3:3:sys:/dev:/bin/false\nsync:x:4:100:sync:/bin:/bin/sync\nmail:x:8:8:mail:/var/spool/mail:/bin/false\nwww-data:x:33:33:www-data:/var/www:/bin/false\noperator:x:37:37:Operator:/var:/bin/false\nnobody:x:65534:65534:nobody:/home:/bin/false\n"
	busyboxGroup  = "root:x:0:\ndaemon:x:1:\nbin:x:2:\nsys:x:3:\nadm:x:4:\ntty:x:5:\ndisk:x:6:\nlp:x:7:\nmail:x:8:\nkmem:x:9:\nwheel:x:10:root\ncdrom:x:11:\ndialout:x:18:\nfloppy:x:19:\nvideo:x:28:\naudio:x:29:\ntape:x:32:\nwww-data:x:33:\noperator:x:37:\nutmp:x:43:\nplugdev:x:46:\nstaff:x:50:\nlock:x:54:\nnetdev:x:82:\nusers:x:100:\nnobody:x:65534:\n"
)

// busyboxTar writes the busybox image's root file system.
func busyboxTar(w io.Writer, busybox []byte, applets []string) error {
	tw := tar.NewWriter(w)
	dirs := []struct {
		name string
		mode int64
	}{{"bin", 0o755}, {"etc", 0o755}, {"home", 0o755}, {"root", 0o700}, {"tmp", 0o1777}, {"usr", 0o755}, {"usr/sbin", 0o755}, {"var", 0o755}, {"var/spool", 0o755}, {"var/spool/mail", 0o755}, {"var/www", 0o755}}
	for _, d := range dirs {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d.name + "/", Mode: d.mode}); err != nil {
			return err
		}
	}
	files := []struct {
		name string
		mode int64
		data []byte
	}{{"bin/busybox", 0o755, busybox}, {"etc/passwd", 0o644, []byte(busyboxPasswd)}, {"etc/group", 0o644, []byte(busyboxGroup)}}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data))}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	for _, a := range applets {
		if a == "busybox" || strings.Contains(a, "/") {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777}); err != nil {
			return err
		}
	}
	return tw.Close()
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o755)
}

// runProgram runs a program, keeping the tail of its output for the error.
func runProgram(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail(out, 4096))
	}
	return nil
}
