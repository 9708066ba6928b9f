package images

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// Kubernetes is built with a few timing patches: changes to its source
// that make a start-up wait try at once where the upstream code sleeps a
// whole second first, or look again sooner where it polls. Each changes
// when something happens, never what: no API, flag, default or result differs, and the
// conformance suite runs on the patched build (docs/conformance.md).
// WithStockKubernetes (kindtest build -stock) builds without them; the
// node image lists the patches it carries in its label
// lifetime.LabelImageKubernetesPatches. As for the NetworkPolicy agent
// (netpolpatch.go), a module is patched in a copy, since an overlay
// cannot replace files in the module cache.

// timingPatch replaces old, found exactly once in file of module, by new.
type timingPatch struct {
	// name is what the node image's label lists.
	name   string
	module string
	// file is the file's slash-separated path in the module.
	file     string
	old, new string
}

// timingPatches are the patches a default build carries, measured one by
// one in docs/performance.md ("Timing patches"), which also lists those
// tried that did not pay and were dropped.
var timingPatches = []timingPatch{
	{
		// The API server's post-start hook that creates the default RBAC
		// roles sleeps a second before its first try; every client that
		// RBAC checks, and /healthz, wait for it.
		name:   "rbac-bootstrap-roles-at-once",
		module: kubernetesModule,
		file:   "pkg/registry/rbac/rest/storage_rbac.go",
		old:    "err := wait.Poll(1*time.Second, 30*time.Second, func() (done bool, err error) {\n\t\t\tclient, err := clientset.NewForConfig(",
		new:    "err := wait.PollImmediate(1*time.Second, 30*time.Second, func() (done bool, err error) {\n\t\t\tclient, err := clientset.NewForConfig(",
	},
	{
		// The same for the hook that creates the system priority classes.
		name:   "system-priority-classes-at-once",
		module: kubernetesModule,
		file:   "pkg/registry/scheduling/rest/storage_scheduling.go",
		old:    "err := wait.Poll(1*time.Second, 30*time.Second, func() (done bool, err error) {\n\t\t\tschedClientSet, err :=",
		new:    "err := wait.PollImmediate(1*time.Second, 30*time.Second, func() (done bool, err error) {\n\t\t\tschedClientSet, err :=",
	},
	{
		// The kubelet's pod sync waits for the pod's volumes by polling
		// every 300 ms; the service account volume of kube-proxy and
		// CoreDNS is mounted a few ms after the first poll.
		name:   "kubelet-volume-wait-20ms",
		module: kubernetesModule,
		file:   "pkg/kubelet/volumemanager/volume_manager.go",
		old:    "podAttachAndMountRetryInterval = 300 * time.Millisecond",
		new:    "podAttachAndMountRetryInterval = 20 * time.Millisecond",
	},
	{
		// The volume manager's reconciler mounts what the pod's volumes
		// need every 100 ms; a new pod's sync (the wait above) waited
		// up to that for its first look.
		name:   "kubelet-volume-reconciler-20ms",
		module: kubernetesModule,
		file:   "pkg/kubelet/volumemanager/volume_manager.go",
		old:    "reconcilerLoopSleepPeriod = 100 * time.Millisecond",
		new:    "reconcilerLoopSleepPeriod = 20 * time.Millisecond",
	},
	{
		// Its populator, which adds a new pod's volumes to what the
		// reconciler mounts, looks at the pods every 100 ms too: the
		// static pods' sandboxes were asked 0.29 s after the kubelet
		// had the pods, the machine idle in between.
		name:   "kubelet-volume-populator-20ms",
		module: kubernetesModule,
		file:   "pkg/kubelet/volumemanager/volume_manager.go",
		old:    "desiredStateOfWorldPopulatorLoopSleepPeriod = 100 * time.Millisecond",
		new:    "desiredStateOfWorldPopulatorLoopSleepPeriod = 20 * time.Millisecond",
	},
	{
		// The kubelet's main loop starts before the runtime's first
		// status check and the PLEG's first relist have passed, and waits
		// 100 ms (then 200, 400...) before it looks again.
		name:   "kubelet-syncloop-10ms",
		module: kubernetesModule,
		file:   "pkg/kubelet/kubelet.go",
		old:    "base   = 100 * time.Millisecond\n\t\tmax    = 5 * time.Second",
		new:    "base   = 10 * time.Millisecond\n\t\tmax    = 5 * time.Second",
	},
	{
		// The kubelet starts watching its pods only once its node
		// informer has synced, which it checks once a second; that
		// informer's first lists fail until the API server serves and
		// back off, so the pod watch began up to a second after the
		// informer had synced: CoreDNS's and kube-proxy's sandboxes were
		// asked 1-2 s after the scheduler and controller-manager synced.
		name:   "kubelet-node-sync-100ms",
		module: kubernetesModule,
		file:   "pkg/kubelet/config/apiserver.go",
		old:    "const WaitForAPIServerSyncPeriod = 1 * time.Second",
		new:    "const WaitForAPIServerSyncPeriod = 100 * time.Millisecond",
	},
	{
		// A pod sync the kubelet starts (a probe result, a container
		// that started) waits for a pod status newer than the last sync,
		// which only the PLEG's relist makes: a once-a-second relist
		// holds CoreDNS's readiness back by up to a second.
		name:   "kubelet-pleg-relist-100ms",
		module: kubernetesModule,
		file:   "pkg/kubelet/kubelet.go",
		old:    "genericPlegRelistPeriod    = time.Second * 1",
		new:    "genericPlegRelistPeriod    = time.Millisecond * 100",
	},
	{
		// The controller-manager waits for the API server's /healthz
		// before it starts any controller, polling once a second; the
		// DaemonSet and Deployment controllers that make kube-proxy's and
		// CoreDNS's pods start only then.
		name:   "controller-manager-healthz-100ms",
		module: "k8s.io/controller-manager",
		file:   "app/helper.go",
		old:    "err := wait.PollImmediate(time.Second, timeout, func() (bool, error) {\n\t\thealthStatus := 0",
		new:    "err := wait.PollImmediate(100*time.Millisecond, timeout, func() (bool, error) {\n\t\thealthStatus := 0",
	},
}

// patchedModule is one module the patches change, as a build requires it.
type patchedModule struct {
	path, version string
	// dir is the module's directory in the module cache.
	dir string
	// patches are those that apply to this version of the module.
	patches []timingPatch
}

// patchKubernetes prepares the patched build of the nested module in
// modDir. It copies each module that patches change, as modDir's go.mod
// requires it, to a directory of its own under cacheDir/source (kept for
// the next build: the Go build cache hits only for the same paths),
// patches the copy, and writes under tmp a go.mod, with its go.sum, that
// is modDir's with those modules replaced by the copies. It returns that
// go.mod's path, for go build -modfile, and the names of the patches
// applied. A patch whose text the module does not have (another
// Kubernetes version) is left out and logged; with none left, modfile is
// "".
func patchKubernetes(ctx context.Context, logger Logger, modDir, cacheDir, tmp string, patches []timingPatch) (modfile string, applied []string, err error) {
	mods, err := patchedModules(ctx, modDir, patches, logger)
	if err != nil {
		return "", nil, err
	}
	if len(mods) == 0 {
		return "", nil, nil
	}
	gomod := filepath.Join(tmp, "go.mod")
	for _, name := range []string{"go.mod", "go.sum"} {
		data, err := os.ReadFile(filepath.Join(modDir, name))
		if err != nil {
			return "", nil, err
		}
		if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
			return "", nil, err
		}
	}
	for _, m := range mods {
		dir, err := m.copy(filepath.Join(cacheDir, "source"))
		if err != nil {
			return "", nil, err
		}
		// Replaces a replacement of the module by a version too.
		if err := command(ctx, tmp, goEnv, "go", "mod", "edit", "-replace="+m.path+"="+dir, gomod); err != nil {
			return "", nil, err
		}
		for _, p := range m.patches {
			applied = append(applied, p.name)
		}
	}
	return gomod, applied, nil
}

// patchedModules finds, through go mod download in modDir, the module
// each patch changes, and keeps the patches that apply to it.
func patchedModules(ctx context.Context, modDir string, patches []timingPatch, logger Logger) ([]*patchedModule, error) {
	var mods []*patchedModule
	byPath := map[string]*patchedModule{}
	for _, p := range patches {
		m := byPath[p.module]
		if m == nil {
			dir, version, err := moduleDir(ctx, modDir, p.module)
			if err != nil {
				return nil, err
			}
			m = &patchedModule{path: p.module, version: version, dir: dir}
			byPath[p.module] = m
			mods = append(mods, m)
		}
		code, err := os.ReadFile(filepath.Join(m.dir, filepath.FromSlash(p.file)))
		if errors.Is(err, fs.ErrNotExist) {
			logger.Printf("  timing patch %s left out: %s@%s has no %s", p.name, m.path, m.version, p.file)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("timing patch %s: %w", p.name, err)
		}
		if n := bytes.Count(code, []byte(p.old)); n != 1 {
			logger.Printf("  timing patch %s left out: %s@%s has its code %d times in %s, not once", p.name, m.path, m.version, n, p.file)
			continue
		}
		m.patches = append(m.patches, p)
	}
	kept := mods[:0]
	for _, m := range mods {
		if len(m.patches) > 0 {
			kept = append(kept, m)
		}
	}
	return kept, nil
}

// moduleDir returns the module cache directory and the version of module
// as the go.mod in modDir requires it (replacements followed).
func moduleDir(ctx context.Context, modDir, module string) (dir, version string, err error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module)
	cmd.Dir = modDir
	cmd.Env = append(os.Environ(), goEnv...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", "", fmt.Errorf("go mod download %s (in %s): %w: %s", module, modDir, err, stderr.String())
	}
	var m struct{ Dir, Version string }
	if err := json.Unmarshal(stdout.Bytes(), &m); err != nil || m.Dir == "" {
		return "", "", fmt.Errorf("go mod download %s: no module directory in %q (%v)", module, stdout.String(), err)
	}
	return m.Dir, m.Version, nil
}

// copy returns the directory under sourceRoot that holds the module with
// its patches applied, and makes it unless it exists. Its name holds the
// module, its version and the hash of the patches: a finished directory
// is only ever renamed into place, so a build killed half way leaves
// nothing another one would use.
func (m *patchedModule) copy(sourceRoot string) (string, error) {
	recipe := []string{m.path, m.version}
	for _, p := range m.patches {
		recipe = append(recipe, p.file, p.old, p.new)
	}
	final := filepath.Join(sourceRoot, "patched-"+path.Base(m.path)+"-"+m.version+"-"+hashStrings(recipe...)[:hashLength])
	err := writeDirOnce(final, func(tmp string) error {
		if err := os.CopyFS(tmp, os.DirFS(m.dir)); err != nil {
			return fmt.Errorf("copy %s: %w", m.dir, err)
		}
		for _, p := range m.patches {
			file := filepath.Join(tmp, filepath.FromSlash(p.file))
			code, err := os.ReadFile(file)
			if err != nil {
				return err
			}
			// The module cache's files are read-only, and so are their copies.
			if err := os.Remove(file); err != nil {
				return err
			}
			if err := os.WriteFile(file, []byte(strings.Replace(string(code), p.old, p.new, 1)), 0o644); err != nil {
				return err
			}
		}
		return nil
	})
	return final, err
}

// patchNames lists patches' names, for the node image's label: "none"
// for none.
func patchNames(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}
