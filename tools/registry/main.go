// Command registry runs the CNCF distribution registry
// (github.com/distribution/distribution/v3) on a local directory, for
// kindtest's tests of pushing and pulling node images. With -htpasswd it
// requires basic authentication.
//
//	registry -addr 127.0.0.1:PORT -dir DIR [-htpasswd USER:PASSWORD]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/distribution/distribution/v3/configuration"
	"github.com/distribution/distribution/v3/registry"
	_ "github.com/distribution/distribution/v3/registry/auth/htpasswd"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	"golang.org/x/crypto/bcrypt"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:5000", "address to listen on")
	dir := flag.String("dir", "", "directory to store images in")
	htpasswd := flag.String("htpasswd", "", "USER:PASSWORD: require basic authentication")
	flag.Parse()
	if err := run(*addr, *dir, *htpasswd); err != nil {
		fmt.Fprintf(os.Stderr, "registry: %v\n", err)
		os.Exit(1)
	}
}

func run(addr, dir, htpasswd string) error {
	if dir == "" {
		return errors.New("-dir is required")
	}
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
	if htpasswd != "" {
		user, password, ok := strings.Cut(htpasswd, ":")
		if !ok || user == "" {
			return errors.New("-htpasswd wants USER:PASSWORD")
		}
		hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
		if err != nil {
			return err
		}
		file := filepath.Join(dir, "htpasswd")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(file, []byte(user+":"+string(hash)+"\n"), 0o600); err != nil {
			return err
		}
		cfg += fmt.Sprintf("auth:\n  htpasswd:\n    realm: kindtest\n    path: %q\n", file)
	}
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
