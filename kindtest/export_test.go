package kindtest

import "context"

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

// SetReaperNameForTest makes this process use a reaper container of its
// own, so that tests can observe a reaper's start and end.
func SetReaperNameForTest(name string) { proc.reaperName = name }

// APIRequestForTest sends one request to the API server named by the
// kubeconfig, with its client certificate and checking the server's
// against its certificate authority, as kindtest's own client does.
func APIRequestForTest(ctx context.Context, kubeconfig []byte, method, path string, body, out any) error {
	api, err := newAPIClient(kubeconfig)
	if err != nil {
		return err
	}
	defer api.close()
	return api.do(ctx, method, path, body, out)
}
