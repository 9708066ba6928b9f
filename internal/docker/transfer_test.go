package docker

import (
	"strings"
	"testing"
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
