// Package placement holds the tests of kindtest run from where users run
// them besides the engine's host: against a remote engine over TCP, and
// inside a container of the engine. They are built only with the
// enginematrix tag (see the README): `go test -tags enginematrix
// ./internal/enginetest/...`.
package placement
