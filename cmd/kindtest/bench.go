package main

import (
	"context"
	"io"
)

func bench(ctx context.Context, args []string, out io.Writer) error {
	return usageError{"bench: not yet"}
}
