// Package placement holds the tests of kindtest run from where users run
// them besides the engine's host: against a remote engine over TCP, and
// inside a container of the engine. They live in a package of their own so
// that `go test ./...` runs them beside the engine matrix, each package
// within its own -timeout.
package placement
