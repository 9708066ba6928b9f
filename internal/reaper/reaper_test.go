package reaper

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/kindtest/kindtest/internal/enginetest"
)

func TestServeReapsWhenClientsAreGone(t *testing.T) {
	ctx := context.Background()
	dc := enginetest.Client(t)

	session := fmt.Sprintf("reapertest%d", time.Now().UnixNano()%1e9)
	mk := func(cluster, keep string) {
		labels := map[string]string{labelSession: session, labelCluster: cluster, labelKeep: keep}
		if _, err := dc.CreateNetwork(ctx, cluster, labels); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = dc.RemoveLabelled(context.Background(), map[string]string{labelCluster: cluster}) })
	}
	mk(session+"-gone", "never")
	mk(session+"-kept", "always")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, dc, ln, Config{Session: session, Grace: 200 * time.Millisecond, FirstClient: time.Minute, Logf: t.Logf})
	}()

	// Two clients; the reaper must wait for both to go.
	var conns []net.Conn
	for range 2 {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil || line != Ready {
			t.Fatalf("greeting %q, %v", line, err)
		}
		conns = append(conns, conn)
	}
	conns[0].Close()
	select {
	case err := <-done:
		t.Fatalf("reaper acted with a client still connected: %v", err)
	case <-time.After(time.Second):
	}
	conns[1].Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("reaper did not act after its last client left")
	}
	nets, err := dc.ListNetworks(ctx, map[string]string{labelSession: session})
	if err != nil {
		t.Fatal(err)
	}
	if len(nets) != 1 || nets[0].Name != session+"-kept" {
		t.Errorf("networks left: %v, want only the kept one", nets)
	}
}
