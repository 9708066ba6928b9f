// Command registry is the container registry kindtest runs beside a
// cluster (kindtest.WithRegistry): the CNCF distribution registry
// (github.com/distribution/distribution/v3), storing images on the
// container's own file system, which goes with the container.
//
//	registry [-addr :5000] [-dir /var/lib/registry]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
)

func main() {
	addr := flag.String("addr", ":5000", "address to listen on")
	dir := flag.String("dir", "/var/lib/registry", "directory to store images in")
	flag.Parse()
	if err := run(*addr, *dir); err != nil {
		fmt.Fprintf(os.Stderr, "registry: %v\n", err)
		os.Exit(1)
	}
}

func run(addr, dir string) error {
	cfg := fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %q
  delete:
    enabled: true
http:
  addr: %q
`, dir, addr)
	config, err := configuration.Parse(strings.NewReader(cfg))
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	reg, err := registry.NewRegistry(ctx, config)
	if err != nil {
		return err
	}
	fmt.Printf("registry listening on %s\n", addr)
	return reg.ListenAndServe()
}
