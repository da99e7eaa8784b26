package server_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/tabbridge/tabbridge/server"
	"github.com/tabbridge/tabbridge/store/storetest"
)

// TestShutdownStopsAServeNotYetStarted: a serve command cancelled while it starts calls Shutdown
// before (or while) Serve starts; Fiber's own shutdown stops only a running server, so without
// closing the listener Serve would go on serving after the process meant to stop.
func TestShutdownStopsAServeNotYetStarted(t *testing.T) {
	db := storetest.Open(t, storetest.SQLite)
	for _, order := range []string{"shutdown first", "together"} {
		t.Run(order, func(t *testing.T) {
			srv, err := server.New(server.Options{DB: db, Key: make([]byte, 32), PublicURL: "http://127.0.0.1:1"})
			if err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			served := make(chan error, 1)
			if order == "shutdown first" {
				if err := srv.Shutdown(context.Background()); err != nil {
					t.Fatal(err)
				}
				go func() { served <- srv.Serve(ln) }()
			} else {
				go func() { served <- srv.Serve(ln) }()
				if err := srv.Shutdown(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case err := <-served:
				if err != nil && !errors.Is(err, server.ErrServerClosed) {
					t.Fatalf("Serve after Shutdown: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Serve kept serving after Shutdown")
			}
			if c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
				c.Close()
				t.Fatal("the listener still takes connections after Shutdown")
			}
		})
	}
}
