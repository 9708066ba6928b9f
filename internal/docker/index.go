package docker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/docker/docker/api/types/registry"
)

// The Engine API pushes one image per reference; an image index (the
// multi-platform image a pull resolves to the engine's platform) is
// written to the registry directly, through the distribution API, with
// the credentials the docker CLI would use (see registryAuth).

const (
	mediaTypeOCIIndex    = "application/vnd.oci.image.index.v1+json"
	mediaTypeOCIManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeDockerV2    = "application/vnd.docker.distribution.manifest.v2+json"
)

// PushIndex writes an OCI image index under ref (registry/repo:tag) that
// names, for each platform ("linux/arm64"), the image already pushed as
// perPlatform[platform], in the same repository. A pull of ref then picks
// the engine's platform.
func (c *Client) PushIndex(ctx context.Context, ref string, perPlatform map[string]string) error {
	host := RegistryHost(ref)
	name, tag, ok := splitRef(ref)
	if host == "" || !ok || strings.Contains(ref, "@") {
		return fmt.Errorf("push index %s: want a registry reference HOST/PATH:TAG", ref)
	}
	if len(perPlatform) == 0 {
		return fmt.Errorf("push index %s: no platform images", ref)
	}
	repo := strings.TrimPrefix(name, host+"/")
	creds, err := registryCredentials(ref)
	if err != nil {
		return fmt.Errorf("push index %s: %w", ref, err)
	}
	scheme := "https"
	if c.plainHTTP(ctx, host) {
		scheme = "http"
	}
	rc := &registryClient{
		http:  &http.Client{Timeout: 2 * time.Minute},
		base:  scheme + "://" + host,
		repo:  repo,
		creds: creds,
	}

	type descriptor struct {
		MediaType string            `json:"mediaType"`
		Digest    string            `json:"digest"`
		Size      int64             `json:"size"`
		Platform  map[string]string `json:"platform"`
	}
	index := struct {
		SchemaVersion int          `json:"schemaVersion"`
		MediaType     string       `json:"mediaType"`
		Manifests     []descriptor `json:"manifests"`
	}{SchemaVersion: 2, MediaType: mediaTypeOCIIndex}
	for _, platform := range slices.Sorted(maps.Keys(perPlatform)) {
		src := perPlatform[platform]
		srcName, srcTag, ok := splitRef(src)
		if !ok || srcName != name {
			return fmt.Errorf("push index %s: the image for %s, %s, is not in the repository %s", ref, platform, src, name)
		}
		goos, arch, _ := strings.Cut(platform, "/")
		arch, variant, _ := strings.Cut(arch, "/")
		mediaType, digest, size, err := rc.manifest(ctx, srcTag)
		if err != nil {
			return fmt.Errorf("push index %s: the image for %s: %w", ref, platform, err)
		}
		d := descriptor{MediaType: mediaType, Digest: digest, Size: size, Platform: map[string]string{"os": goos, "architecture": arch}}
		if variant != "" {
			d.Platform["variant"] = variant
		}
		index.Manifests = append(index.Manifests, d)
	}
	body, err := json.Marshal(index)
	if err != nil {
		return err
	}
	if err := rc.putManifest(ctx, tag, mediaTypeOCIIndex, body); err != nil {
		return fmt.Errorf("push index %s: %w", ref, err)
	}
	return nil
}

// plainHTTP reports whether the registry at host is spoken to without
// TLS, as the engine does: a loopback address, or one the engine was told
// is insecure (--insecure-registry).
func (c *Client) plainHTTP(ctx context.Context, host string) bool {
	hostname := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		hostname = h
	}
	if hostname == "localhost" {
		return true
	}
	ip := net.ParseIP(hostname)
	if ip != nil && ip.IsLoopback() {
		return true
	}
	info, err := c.api.Info(ctx)
	if err != nil || info.RegistryConfig == nil {
		return false
	}
	if idx, ok := info.RegistryConfig.IndexConfigs[host]; ok && !idx.Secure {
		return true
	}
	if ip == nil {
		return false
	}
	for _, cidr := range info.RegistryConfig.InsecureRegistryCIDRs {
		if (*net.IPNet)(cidr).Contains(ip) {
			return true
		}
	}
	return false
}

// registryClient speaks the distribution API to one repository.
type registryClient struct {
	http  *http.Client
	base  string
	repo  string
	creds registry.AuthConfig
	// auth is the Authorization header that the last challenge asked for.
	auth string
}

// manifest returns the media type, digest and size of the manifest tagged
// tag.
func (r *registryClient) manifest(ctx context.Context, tag string) (string, string, int64, error) {
	resp, err := r.do(ctx, http.MethodGet, "/manifests/"+tag, "pull", func(req *http.Request) {
		req.Header.Set("Accept", mediaTypeOCIManifest+", "+mediaTypeDockerV2)
	}, nil)
	if err != nil {
		return "", "", 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return "", "", 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return "", "", 0, fmt.Errorf("GET manifest %s:%s: %s: %s", r.repo, tag, resp.Status, strings.TrimSpace(string(body)))
	}
	mediaType, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	if mediaType != mediaTypeOCIManifest && mediaType != mediaTypeDockerV2 {
		return "", "", 0, fmt.Errorf("%s:%s is a %s, not one platform's image manifest", r.repo, tag, mediaType)
	}
	sum := sha256.Sum256(body)
	return mediaType, "sha256:" + hex.EncodeToString(sum[:]), int64(len(body)), nil
}

func (r *registryClient) putManifest(ctx context.Context, tag, mediaType string, body []byte) error {
	resp, err := r.do(ctx, http.MethodPut, "/manifests/"+tag, "pull,push", func(req *http.Request) {
		req.Header.Set("Content-Type", mediaType)
	}, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("PUT manifest %s:%s: %s: %s", r.repo, tag, resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

// do sends a request for path under the repository, answering the
// registry's authentication challenge (basic, or a bearer token for
// scope) once.
func (r *registryClient) do(ctx context.Context, method, path, scope string, prepare func(*http.Request), body []byte) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, method, r.base+"/v2/"+r.repo+path, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		prepare(req)
		if r.auth != "" {
			req.Header.Set("Authorization", r.auth)
		}
		resp, err := r.http.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusUnauthorized || attempt > 0 {
			return resp, nil
		}
		challenge := resp.Header.Get("WWW-Authenticate")
		resp.Body.Close()
		if r.auth, err = r.answer(ctx, challenge, scope); err != nil {
			return nil, err
		}
	}
}

// answer returns the Authorization header for a WWW-Authenticate
// challenge.
func (r *registryClient) answer(ctx context.Context, challenge, scope string) (string, error) {
	kind, params, _ := strings.Cut(challenge, " ")
	switch strings.ToLower(kind) {
	case "basic":
		if r.creds.Username == "" {
			return "", errors.New("the registry wants credentials and the docker CLI's config has none for it")
		}
		req, _ := http.NewRequest(http.MethodGet, "/", nil)
		req.SetBasicAuth(r.creds.Username, r.creds.Password)
		return req.Header.Get("Authorization"), nil
	case "bearer":
		return r.token(ctx, parseChallenge(params), scope)
	}
	return "", fmt.Errorf("the registry asks for %q authentication, which kindtest does not speak", challenge)
}

// token fetches a bearer token from the challenge's realm, by the
// distribution token protocol: a GET with basic credentials, or a POST of
// the identity token (`docker login` to an OAuth registry).
func (r *registryClient) token(ctx context.Context, params map[string]string, scope string) (string, error) {
	realm := params["realm"]
	if realm == "" {
		return "", errors.New("the registry's bearer challenge names no realm")
	}
	q := url.Values{}
	if s := params["service"]; s != "" {
		q.Set("service", s)
	}
	q.Set("scope", "repository:"+r.repo+":"+scope)
	var req *http.Request
	var err error
	if r.creds.IdentityToken != "" {
		q.Set("grant_type", "refresh_token")
		q.Set("refresh_token", r.creds.IdentityToken)
		q.Set("client_id", "kindtest")
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, realm, strings.NewReader(q.Encode()))
		if err == nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	} else {
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, realm+"?"+q.Encode(), nil)
		if err == nil && r.creds.Username != "" {
			req.SetBasicAuth(r.creds.Username, r.creds.Password)
		}
	}
	if err != nil {
		return "", err
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("token from %s: %w", realm, err)
	}
	defer resp.Body.Close()
	var answer struct {
		Token       string `json:"token"`
		AccessToken string `json:"access_token"`
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return "", fmt.Errorf("token from %s: %s: %s", realm, resp.Status, strings.TrimSpace(string(msg)))
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		return "", fmt.Errorf("token from %s: %w", realm, err)
	}
	token := answer.Token
	if token == "" {
		token = answer.AccessToken
	}
	if token == "" {
		return "", fmt.Errorf("token from %s: the answer holds no token", realm)
	}
	return "Bearer " + token, nil
}

// parseChallenge parses the key="value" parameters of a challenge.
func parseChallenge(s string) map[string]string {
	out := map[string]string{}
	for s != "" {
		s = strings.TrimLeft(s, " ,")
		key, rest, ok := strings.Cut(s, "=")
		if !ok {
			break
		}
		var value string
		if strings.HasPrefix(rest, `"`) {
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				value, rest = rest[1:], ""
			} else {
				value, rest = rest[1:1+end], rest[2+end:]
			}
		} else {
			value, rest, _ = strings.Cut(rest, ",")
		}
		out[strings.ToLower(strings.TrimSpace(key))] = value
		s = rest
	}
	return out
}
