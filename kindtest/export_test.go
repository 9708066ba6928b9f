package kindtest

// WithRuntimeForTest runs the nodes with another OCI runtime, so that tests
// can make node containers fail to start.
func WithRuntimeForTest(name string) Option {
	return func(c *config) error { c.runtime = name; return nil }
}
