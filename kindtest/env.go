package kindtest

import "os"

// The environment variables kindtest reads, every one of them; the package
// documentation describes them in one block. Nothing else in the package
// calls os.Getenv. (internal/docker reads DOCKER_HOST, DOCKER_CONTEXT and
// DOCKER_CONFIG, as the docker CLI does.)
const (
	envImage     = "KINDTEST_IMAGE"
	envKeep      = "KINDTEST_KEEP"
	envReuse     = "KINDTEST_REUSE"
	envArtifacts = "ARTIFACTS"
	envReaper    = "KINDTEST_REAPER"
	envSession   = "KINDTEST_SESSION"
	envPool      = "KINDTEST_POOL"
	envCI        = "CI"
)

// getenv reads one of the variables above.
func getenv(name string) string { return os.Getenv(name) }

// inCI says whether a missing engine fails tests instead of skipping them.
func inCI() bool { return getenv(envCI) != "" }
