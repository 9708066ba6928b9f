package docker

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/registry"
)

func TestRegistryHost(t *testing.T) {
	for ref, want := range map[string]string{
		"kindtest/node:v1.37.2":                     "",
		"node":                                      "",
		"registry.example.com/kindtest/node:v1":     "registry.example.com",
		"127.0.0.1:5000/kindtest/node:test":         "127.0.0.1:5000",
		"localhost/node:v1":                         "localhost",
		"ghcr.io/org/kindtest/node@sha256:0123abcd": "ghcr.io",
	} {
		if got := RegistryHost(ref); got != want {
			t.Errorf("RegistryHost(%q) = %q, want %q", ref, got, want)
		}
	}
}

func TestFollowTransfer(t *testing.T) {
	stream := `{"status":"Pulling from kindtest/node","id":"v1"}
{"status":"Pulling fs layer","id":"a"}
{"status":"Already exists","id":"b"}
{"status":"Downloading","progressDetail":{"current":50,"total":100},"id":"a"}
{"status":"Pull complete","id":"a"}
{"status":"Digest: sha256:00"}
`
	var last Transfer
	if err := followTransfer(strings.NewReader(stream), func(tr Transfer) { last = tr }); err != nil {
		t.Fatal(err)
	}
	if last.Layers != 2 || last.Done != 2 || last.Current != 100 || last.Total != 100 {
		t.Fatalf("last state %+v", last)
	}
	failing := `{"status":"Pulling fs layer","id":"a"}
{"errorDetail":{"message":"unauthorized"},"error":"unauthorized"}
`
	if err := followTransfer(strings.NewReader(failing), nil); err == nil || !strings.Contains(err.Error(), "unauthorized") {
		t.Fatalf("error in the stream: %v", err)
	}
}

// credHelper writes an executable docker-credential-NAME into a directory
// put first on PATH: it answers "get" for server want with user and
// secret, and says "credentials not found" for any other.
func credHelper(t *testing.T, name, want, user, secret string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in credential helper is a shell script")
	}
	dir := t.TempDir()
	script := fmt.Sprintf(`#!/bin/sh
[ "$1" = get ] || { echo "unknown verb $1" >&2; exit 1; }
read -r server
if [ "$server" = %q ]; then
  printf '{"ServerURL":"%%s","Username":%q,"Secret":%q}\n' "$server"
else
  echo "credentials not found in native keychain"; exit 1
fi
`, want, user, secret)
	if err := os.WriteFile(filepath.Join(dir, "docker-credential-"+name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

func decodeAuth(t *testing.T, header string) registry.AuthConfig {
	t.Helper()
	raw, err := base64.URLEncoding.DecodeString(header)
	if err != nil {
		t.Fatalf("X-Registry-Auth %q: %v", header, err)
	}
	var cfg registry.AuthConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("X-Registry-Auth %q: %v", raw, err)
	}
	return cfg
}

func TestRegistryAuthSources(t *testing.T) {
	const host = "registry.example.com"
	ref := host + "/kindtest/node:v1"
	basic := base64.StdEncoding.EncodeToString([]byte("fileuser:filepass"))
	for _, tc := range []struct {
		name, config             string
		user, password, identity string
		err                      string
	}{
		{name: "no config"},
		{name: "auths", config: `{"auths":{"registry.example.com":{"auth":"` + basic + `"}}}`, user: "fileuser", password: "filepass"},
		{name: "auths with scheme", config: `{"auths":{"https://registry.example.com":{"auth":"` + basic + `"}}}`, user: "fileuser", password: "filepass"},
		{name: "identity token", config: `{"auths":{"registry.example.com":{"identitytoken":"tok"}}}`, identity: "tok"},
		{name: "credsStore", config: `{"auths":{"registry.example.com":{}},"credsStore":"kttest"}`, user: "storeuser", password: "storepass"},
		{name: "credHelpers before credsStore", config: `{"credsStore":"missing","credHelpers":{"registry.example.com":"kttest"}}`, user: "storeuser", password: "storepass"},
		{name: "credHelpers before auths", config: `{"auths":{"registry.example.com":{"auth":"` + basic + `"}},"credHelpers":{"registry.example.com":"kttest"}}`, user: "storeuser", password: "storepass"},
		{name: "helper knows nothing", config: `{"credHelpers":{"registry.example.com":"kttestother"}}`},
		{name: "token from helper", config: `{"credsStore":"kttesttoken"}`, identity: "refresh"},
		{name: "helper missing", config: `{"credsStore":"missing"}`, err: `docker-credential-missing is not on PATH`},
		{name: "helper fails", config: `{"credsStore":"kttestbroken"}`, err: `docker-credential-kttestbroken get: exit status 1: unknown verb`},
		{name: "bad JSON", config: `{"auths":`, err: "config.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			credHelper(t, "kttest", host, "storeuser", "storepass")
			credHelper(t, "kttestother", "other.example.com", "x", "y")
			credHelper(t, "kttesttoken", host, "<token>", "refresh")
			dir := t.TempDir()
			// A helper that fails on every verb, as a broken install would.
			if err := os.WriteFile(filepath.Join(dir, "docker-credential-kttestbroken"), []byte("#!/bin/sh\necho unknown verb >&2\nexit 1\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
			if tc.config != "" {
				if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(tc.config), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("DOCKER_CONFIG", dir)
			header, err := registryAuth(ref)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), host) {
					t.Fatalf("registryAuth: %v, want an error naming %s and saying %q", err, host, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := decodeAuth(t, header)
			if got.ServerAddress != host || got.Username != tc.user || got.Password != tc.password || got.IdentityToken != tc.identity {
				t.Errorf("registryAuth: %+v, want server %s, user %q, password %q, identity token %q", got, host, tc.user, tc.password, tc.identity)
			}
		})
	}
}
