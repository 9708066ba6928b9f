package kindtest

// WithRuntimeForTest runs the nodes with another OCI runtime, so that tests
// can make node containers fail to start.
func WithRuntimeForTest(name string) Option {
	return func(c *config) error { c.runtime = name; return nil }
}

// WithInitWrapperForTest puts a command before `kubeadm init`, such as
// "timeout 2 ", so that tests can make init fail fast.
func WithInitWrapperForTest(prefix string) Option {
	return func(c *config) error { c.initWrapper = prefix; return nil }
}

// Panicking reports what Start's cleanup sees of a panic in progress.
func Panicking() bool { return panicking() }
