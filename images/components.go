package images

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kindtest/kindtest/internal/docker"
	"github.com/kindtest/kindtest/internal/imageref"
)

// component is how one image of the cluster is made from a binary.
type component struct {
	// binary is the program's name in the bin directory and in the image.
	binary string
	// base is the rootfs the image starts from; nil means FROM scratch.
	base *rootfs
}

// components are keyed by the last element of the image name kubeadm uses
// (or, for images kubeadm does not name, of the name kindtest gives them).
var components = map[string]component{
	"kube-apiserver":          {binary: "kube-apiserver"},
	"kube-controller-manager": {binary: "kube-controller-manager"},
	"kube-scheduler":          {binary: "kube-scheduler"},
	// kube-proxy in iptables mode runs the iptables tools.
	"kube-proxy": {binary: "kube-proxy", base: &kubeProxyBase},
	"etcd":       {binary: "etcd"},
	"coredns":    {binary: "coredns"},
	"pause":      {binary: "pause"},
	// The provisioner's helper pods run sh, mkdir, rm and chmod from the
	// same image; the kube-proxy base has them and shares its layers.
	"local-path-provisioner": {binary: "local-path-provisioner", base: &kubeProxyBase},
	// The NetworkPolicy agent programs nftables and nfqueue through
	// netlink, not the nft tool: it needs nothing but its static binary.
	"kube-network-policies": {binary: "kube-network-policies"},
}

// LocalPathProvisionerImage is the image of the local-path provisioner,
// the dynamic provisioner of a cluster's default StorageClass, preloaded
// into every node image beside the images kubeadm expects. It also runs
// the provisioner's helper pods, which create and remove volume
// directories on the node. The host name is reserved (RFC 2606): the
// image is never pulled. Its tag is the version that
// local-path-provisioner/go.mod requires.
const LocalPathProvisionerImage = imageref.LocalPathProvisioner

// localPathProvisionerVersion is the version of
// github.com/rancher/local-path-provisioner that
// local-path-provisioner/go.mod requires (a test keeps them equal).
const localPathProvisionerVersion = imageref.LocalPathProvisionerVersion

// localPathProvisionerModule is the Go module of the provisioner.
const localPathProvisionerModule = "github.com/rancher/local-path-provisioner"

// NetworkPoliciesImage is the image of kube-network-policies, the agent
// that enforces NetworkPolicy on the nodes of a cluster whose pod network
// is kindtest's own, preloaded into every node image beside the images
// kubeadm expects. Like LocalPathProvisionerImage, it is never pulled. Its
// tag is the version that network-policies/go.mod requires.
const NetworkPoliciesImage = imageref.NetworkPolicies

// networkPoliciesVersion is the version of sigs.k8s.io/kube-network-policies
// that network-policies/go.mod requires (a test keeps them equal).
const networkPoliciesVersion = imageref.NetworkPoliciesVersion

// networkPoliciesModule is the Go module of the agent; its main package
// is the module's cmd directory.
const networkPoliciesModule = "sigs.k8s.io/kube-network-policies"

// kubeadmImages asks the freshly built kubeadm (at the path kubeadm, one
// that runs on this machine) which images it will run,
// and adds the sandbox image that the node's containerd runs pods with if
// kubeadm names another pause version.
func (b *builder) kubeadmImages(ctx context.Context, kubeadm string) ([]string, error) {
	cmd := exec.CommandContext(ctx, kubeadm, "config", "images", "list",
		"--kubernetes-version", b.res.KubernetesVersion)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("kubeadm config images list: %w: %s", err, stderr.String())
	}
	refs := strings.Fields(stdout.String())
	if len(refs) == 0 {
		return nil, fmt.Errorf("kubeadm config images list printed no image")
	}
	sandbox, err := sandboxImage(filepath.Join(b.cfg.sourceDir, "node", "containerd.toml"))
	if err != nil {
		return nil, err
	}
	if sandbox != "" && !slices.Contains(refs, sandbox) {
		b.cfg.logger.Printf("  kubeadm %s expects %v; adding containerd's sandbox image %s", b.res.KubernetesVersion, refs, sandbox)
		refs = append(refs, sandbox)
	}
	return refs, nil
}

// sandboxImage returns the pause image that the containerd configuration
// at path pins for pod sandboxes, or "" if it names none.
func sandboxImage(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read containerd configuration: %w", err)
	}
	for line := range strings.Lines(string(data)) {
		key, value, ok := strings.Cut(line, "=")
		if ok && strings.TrimSpace(key) == "sandbox" {
			return strings.Trim(strings.TrimSpace(value), `'"`), nil
		}
	}
	return "", nil
}

// componentName returns the key into components of an image reference.
func componentName(ref string) string {
	name := ref
	if i := strings.LastIndexByte(name, ':'); i > strings.LastIndexByte(name, '/') {
		name = name[:i]
	}
	return path.Base(name)
}

// componentDockerfile is the Dockerfile of one component image.
func componentDockerfile(c component, baseRef string) string {
	from := "scratch"
	if c.base != nil {
		from = baseRef
	}
	return fmt.Sprintf(`FROM %s
COPY %[2]s /usr/local/bin/%[2]s
ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin
ENTRYPOINT ["/usr/local/bin/%[2]s"]
`, from, c.binary)
}

// componentImages builds one image per image kubeadm expects, under the
// exact reference kubeadm uses.
func (b *builder) componentImages(ctx context.Context) error {
	for _, ref := range b.components {
		c, ok := components[componentName(ref)]
		if !ok {
			return fmt.Errorf("kubeadm expects image %s, which kindtest does not know how to build", ref)
		}
		baseRef := ""
		if c.base != nil {
			var err error
			if baseRef, _, err = c.base.ref(b.cfg.sourceDir, b.platform); err != nil {
				return err
			}
		}
		files := []tarFile{
			{name: "Dockerfile", data: []byte(componentDockerfile(c, baseRef)), mode: 0o644},
			{name: c.binary, path: filepath.Join(b.binDir, c.binary), mode: 0o755},
		}
		if err := b.buildImage(ctx, files, b.res.Local(ref), nil); err != nil {
			return err
		}
		b.cfg.logger.Printf("  %s built", b.res.Local(ref))
	}
	return nil
}

// buildImage builds a context made of files and tags the result ref; the
// builder's output is kept for the error. The image ref named before, if
// the build gives another, is removed (see replaceImage).
func (b *builder) buildImage(ctx context.Context, files []tarFile, ref string, args map[string]string) error {
	var oldID string
	if img, err := b.cli.InspectImage(ctx, ref); err == nil {
		oldID = img.ID
	} else if !docker.IsNotFound(err) {
		return err
	}
	tarStream := contextTar(files)
	defer tarStream.Close()
	return replaceImage(ctx, b.cli, ref, oldID, b.cfg.logger, func() error {
		var out tailBuffer
		if err := b.cli.BuildImage(ctx, tarStream, docker.BuildSpec{Tags: []string{ref}, Dockerfile: "Dockerfile", BuildArgs: args, Platform: b.platform.String()}, &out); err != nil {
			return fmt.Errorf("%w\n%s", err, out.String())
		}
		return nil
	})
}
