package docker

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"
)

// Transfer is the state of a pull or a push, reported as it goes.
type Transfer struct {
	// Layers is how many layers the engine has named so far; Done how many
	// of them are complete (moved, or already there).
	Layers, Done int
	// Current and Total are bytes moved and to move, over the layers in
	// flight whose size the engine reported.
	Current, Total int64
}

// PullImage pulls ref from its registry, calling progress (if not nil)
// with the transfer's state after every message of the engine. Credentials
// come from the docker CLI's configuration (see registryAuth).
func (c *Client) PullImage(ctx context.Context, ref string, progress func(Transfer)) error {
	auth, err := registryAuth(ref)
	if err != nil {
		return fmt.Errorf("pull image %s: %w", ref, err)
	}
	rc, err := c.api.ImagePull(ctx, ref, image.PullOptions{RegistryAuth: auth})
	if err != nil {
		return fmt.Errorf("pull image %s: %w", ref, err)
	}
	defer rc.Close()
	if err := followTransfer(rc, progress); err != nil {
		return fmt.Errorf("pull image %s: %w", ref, err)
	}
	return nil
}

// PushImage pushes ref to its registry, reporting progress like PullImage.
func (c *Client) PushImage(ctx context.Context, ref string, progress func(Transfer)) error {
	auth, err := registryAuth(ref)
	if err != nil {
		return fmt.Errorf("push image %s: %w", ref, err)
	}
	rc, err := c.api.ImagePush(ctx, ref, image.PushOptions{RegistryAuth: auth})
	if err != nil {
		return fmt.Errorf("push image %s: %w", ref, err)
	}
	defer rc.Close()
	if err := followTransfer(rc, progress); err != nil {
		return fmt.Errorf("push image %s: %w", ref, err)
	}
	return nil
}

// followTransfer reads a pull or push message stream to its end; an error
// message in it is returned as an error.
func followTransfer(r io.Reader, progress func(Transfer)) error {
	type layer struct {
		done           bool
		current, total int64
	}
	layers := map[string]*layer{}
	var order []string
	dec := json.NewDecoder(r)
	for {
		var m jsonmessage.JSONMessage
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("read the engine's progress: %w", err)
		}
		if m.Error != nil {
			return m.Error
		}
		if m.ID == "" || progress == nil {
			continue
		}
		l := layers[m.ID]
		// Messages with an ID are about layers, except the final tag
		// line of a push ("v1: digest: ..."), which has no layer status.
		switch {
		case l == nil && (m.Status == "Pulling fs layer" || m.Status == "Waiting" || m.Status == "Preparing" ||
			m.Status == "Already exists" || m.Status == "Layer already exists"):
			l = &layer{}
			layers[m.ID] = l
			order = append(order, m.ID)
		case l == nil:
			continue
		}
		switch {
		case m.Status == "Pull complete" || m.Status == "Already exists" || m.Status == "Pushed" ||
			m.Status == "Layer already exists" || strings.HasPrefix(m.Status, "Mounted from"):
			l.done = true
			if l.total > 0 {
				l.current = l.total
			}
		case m.Progress != nil && m.Progress.Total > 0 && (m.Status == "Downloading" || m.Status == "Pushing"):
			l.current, l.total = m.Progress.Current, m.Progress.Total
		}
		var t Transfer
		for _, id := range order {
			l := layers[id]
			t.Layers++
			if l.done {
				t.Done++
			}
			t.Current += l.current
			t.Total += l.total
		}
		progress(t)
	}
}

// LoadImages loads a `docker save` archive into the engine and returns the
// references it tagged. The engine tags an image only once all of its
// layers are in, so a failed load leaves no tag on a partial image.
func (c *Client) LoadImages(ctx context.Context, archive io.Reader) ([]string, error) {
	resp, err := c.api.ImageLoad(ctx, archive, client.ImageLoadWithQuiet(true))
	if err != nil {
		return nil, fmt.Errorf("load images: %w", err)
	}
	defer resp.Body.Close()
	var loaded []string
	dec := json.NewDecoder(resp.Body)
	for {
		var m jsonmessage.JSONMessage
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return loaded, nil
		} else if err != nil {
			return loaded, fmt.Errorf("load images: read the engine's answer: %w", err)
		}
		if m.Error != nil {
			return loaded, fmt.Errorf("load images: %w", m.Error)
		}
		for line := range strings.Lines(m.Stream) {
			if ref, ok := strings.CutPrefix(strings.TrimSpace(line), "Loaded image: "); ok {
				loaded = append(loaded, c.engine.loadedName(ref))
			}
		}
	}
}

// registryAuth returns the X-Registry-Auth value for ref's registry, found
// as the docker CLI finds it in its config.json ($DOCKER_CONFIG/config.json,
// default ~/.docker/config.json): the registry's credential helper
// (credHelpers), else the credential store (credsStore), else the
// credentials `docker login` wrote into auths. A registry none of them
// knows gets none. A helper that fails otherwise is an error naming it.
func registryAuth(ref string) (string, error) {
	cfg, err := registryCredentials(ref)
	if err != nil {
		return "", err
	}
	return registry.EncodeAuthConfig(cfg)
}

// registryCredentials finds the credentials for ref's registry, as
// registryAuth says.
func registryCredentials(ref string) (registry.AuthConfig, error) {
	host := RegistryHost(ref)
	cfg := registry.AuthConfig{ServerAddress: host}
	dir := os.Getenv("DOCKER_CONFIG")
	if dir == "" {
		if home, err := os.UserHomeDir(); err == nil {
			dir = filepath.Join(home, ".docker")
		}
	}
	path := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(path)
	if err != nil || host == "" {
		return cfg, nil
	}
	var file struct {
		Auths map[string]struct {
			Auth          string `json:"auth"`
			IdentityToken string `json:"identitytoken"`
		} `json:"auths"`
		CredsStore  string            `json:"credsStore"`
		CredHelpers map[string]string `json:"credHelpers"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		return cfg, fmt.Errorf("credentials for %s: the docker CLI's config %s is not valid JSON (%v): fix it, or point DOCKER_CONFIG at another directory", host, path, err)
	}
	keys := []string{host, "https://" + host, "http://" + host}
	helper := file.CredsStore
	for _, key := range keys {
		if h, ok := file.CredHelpers[key]; ok {
			helper = h
			break
		}
	}
	if helper != "" {
		user, secret, err := credentialHelper(helper, host)
		if err != nil {
			return cfg, fmt.Errorf("credentials for %s (credential helper %q in %s): %w", host, helper, path, err)
		}
		if user == "<token>" {
			cfg.IdentityToken = secret
		} else {
			cfg.Username, cfg.Password = user, secret
		}
		return cfg, nil
	}
	for _, key := range keys {
		entry, ok := file.Auths[key]
		if !ok || (entry.Auth == "" && entry.IdentityToken == "") {
			continue
		}
		if entry.Auth != "" {
			raw, err := base64.StdEncoding.DecodeString(entry.Auth)
			if err != nil {
				return cfg, fmt.Errorf("credentials for %s in %s: %w", host, path, err)
			}
			cfg.Username, cfg.Password, _ = strings.Cut(string(raw), ":")
		}
		cfg.IdentityToken = entry.IdentityToken
		break
	}
	return cfg, nil
}

// credentialHelperTimeout bounds one run of a credential helper; one that
// asks a keychain for a password may wait for the user, but not forever.
const credentialHelperTimeout = 30 * time.Second

// credentialHelper asks the docker credential helper docker-credential-NAME
// for host's credentials, by its protocol: "get" with the server on
// standard input, a JSON answer on standard output. A helper that knows
// no credentials for host says so and exits non-zero; that is no
// credentials, not an error.
func credentialHelper(name, host string) (user, secret string, err error) {
	prog := "docker-credential-" + name
	ctx, cancel := context.WithTimeout(context.Background(), credentialHelperTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, "get")
	cmd.Stdin = strings.NewReader(host)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		said := strings.TrimSpace(stdout.String() + " " + stderr.String())
		if strings.Contains(strings.ToLower(said), "credentials not found") {
			return "", "", nil
		}
		if errors.Is(err, exec.ErrNotFound) {
			return "", "", fmt.Errorf("%s is not on PATH: install it, or remove it from the docker CLI's config", prog)
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("no answer within %v", credentialHelperTimeout)
		}
		return "", "", fmt.Errorf("%s get: %v: %s", prog, err, said)
	}
	var answer struct {
		Username string `json:"Username"`
		Secret   string `json:"Secret"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &answer); err != nil {
		return "", "", fmt.Errorf("%s get answered %q: %w", prog, stdout.String(), err)
	}
	return answer.Username, answer.Secret, nil
}

// RegistryHost returns the registry part of an image reference, by the
// docker CLI's rule: the first path element, when there is more than one
// and it has a dot or a colon or is "localhost"; "" otherwise (an image of
// Docker Hub or a local name such as kindtest/node:v1.37.2).
func RegistryHost(ref string) string {
	first, rest, ok := strings.Cut(ref, "/")
	if !ok || rest == "" {
		return ""
	}
	if strings.ContainsAny(first, ".:") || first == "localhost" {
		return first
	}
	return ""
}

// ProgressEvery returns a progress function for PullImage and PushImage
// that passes a transfer's state on to report at most once per interval.
func ProgressEvery(interval time.Duration, report func(Transfer)) func(Transfer) {
	var last time.Time
	return func(t Transfer) {
		if now := time.Now(); now.Sub(last) >= interval {
			last = now
			report(t)
		}
	}
}

// String describes a transfer's state: "3/9 layers, 120 of 480 MB".
func (t Transfer) String() string {
	s := fmt.Sprintf("%d/%d layers", t.Done, t.Layers)
	if t.Total > 0 {
		s += fmt.Sprintf(", %d of %d MB", t.Current>>20, t.Total>>20)
	}
	return s
}
