package images

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// kube-network-policies v0.8.0 sends packets to its nfqueue with the
// nftables queue expression (nft_queue, CONFIG_NFT_QUEUE), which some
// kernels leave out while they have the older xtables NFQUEUE target and
// nft_compat, through which nftables rules can use it: the kernel of the
// machine kindtest is built and tested on is one (its rules fail with
// "netlink receive: no such file or directory"). The agent is built from a
// copy of its module in which the two places that make that expression
// call kindtestQueue instead, which makes the NFQUEUE target: the same
// queue, the same fail-open flag, the same verdicts from user space.

// networkPoliciesQueueBlock is the code replaced, as the module has it.
const networkPoliciesQueueBlock = `	queue := &expr.Queue{Num: uint16(c.config.QueueID)}
	if c.config.FailOpen {
		queue.Flag = expr.QueueFlagBypass
	}
`

// networkPoliciesQueueFile is the file the overlay adds to the agent's
// networkpolicy package.
const networkPoliciesQueueFile = `package networkpolicy

import (
	"encoding/binary"

	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
)

// kindtestQueue returns the xtables NFQUEUE target (revision 3, struct
// xt_NFQ_info_v3: queue number, number of queues, flags; host byte order)
// that sends a packet to queue id, or lets it through if no program
// listens and failOpen is set. Added by kindtest's image build.
func kindtestQueue(id int, failOpen bool) expr.Any {
	info := make(xt.Unknown, 8)
	binary.NativeEndian.PutUint16(info[0:], uint16(id))
	binary.NativeEndian.PutUint16(info[2:], 1)
	if failOpen {
		binary.NativeEndian.PutUint16(info[4:], 1) // NFQ_FLAG_BYPASS
	}
	return &expr.Target{Name: "NFQUEUE", Rev: 3, Info: &info}
}
`

// networkPoliciesPatch copies the agent's module, as modDir (the nested
// module) requires it, under tmp, patches the copy, and writes a go.mod
// (with its go.sum) that is modDir's with the module replaced by the copy;
// it returns that go.mod's path, for go build -modfile. (An overlay cannot
// replace files in the module cache.) A module whose code no longer has
// the block twice is an error that says so.
func networkPoliciesPatch(ctx context.Context, modDir, tmp string) (string, error) {
	modCache, _, err := moduleDir(ctx, modDir, networkPoliciesModule)
	if err != nil {
		return "", err
	}
	src := filepath.Join(tmp, "src")
	if err := os.CopyFS(src, os.DirFS(modCache)); err != nil {
		return "", fmt.Errorf("copy %s: %w", modCache, err)
	}
	pkg := filepath.Join(src, "pkg", "networkpolicy")
	controller := filepath.Join(pkg, "controller.go")
	code, err := os.ReadFile(controller)
	if err != nil {
		return "", err
	}
	if n := strings.Count(string(code), networkPoliciesQueueBlock); n != 2 {
		return "", fmt.Errorf("%s: the nfqueue expression is made in %d places, want 2: update networkPoliciesPatch for this version of %s",
			filepath.Join(modCache, "pkg", "networkpolicy", "controller.go"), n, networkPoliciesModule)
	}
	patched := strings.ReplaceAll(string(code), networkPoliciesQueueBlock, "\tqueue := kindtestQueue(c.config.QueueID, c.config.FailOpen)\n")
	// The module cache's files are read-only, and so are their copies.
	if err := os.Remove(controller); err != nil {
		return "", err
	}
	if err := os.WriteFile(controller, []byte(patched), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(pkg, "kindtest_queue.go"), []byte(networkPoliciesQueueFile), 0o644); err != nil {
		return "", err
	}
	gomod, err := os.ReadFile(filepath.Join(modDir, "go.mod"))
	if err != nil {
		return "", err
	}
	gosum, err := os.ReadFile(filepath.Join(modDir, "go.sum"))
	if err != nil {
		return "", err
	}
	gomod = fmt.Appendf(gomod, "\nreplace %s => %s\n", networkPoliciesModule, src)
	path := filepath.Join(tmp, "go.mod")
	if err := os.WriteFile(path, gomod, 0o644); err != nil {
		return "", err
	}
	return path, os.WriteFile(filepath.Join(tmp, "go.sum"), gosum, 0o644)
}
