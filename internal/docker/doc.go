// Package docker is kindtest's only door to the Docker Engine API.
//
// It wraps github.com/docker/docker/client and exposes small types of its
// own, so that no Docker SDK type appears anywhere else in the module. Every
// call takes a context first; "not found" is reported through IsNotFound so
// that callers never match error text.
package docker
