package api_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"testing"
	"time"

	"bex.co/bex/internal/controlplane"
	"bex.co/bex/internal/httpserve/servetest"
	"bex.co/bex/web/api"
	"bex.co/bex/web/api/apitest"
)

// testSlowClients runs the API on the server bex-web and make run build
// (api.ServerTimeouts().Server), with its timeouts shortened: a client
// dripping its headers and an idle kept-alive connection are hung up on,
// and a followed log stream outlives the write timeout.
func testSlowClients(t *testing.T, cp *controlplane.ControlPlane) {
	tm := api.ServerTimeouts()
	if tm.ReadHeader <= 0 || tm.Read <= 0 || tm.Write <= 0 || tm.Idle <= 0 {
		t.Errorf("api.ServerTimeouts() = %+v, want every limit set", tm)
	}
	e := apitest.Start(t, cp)
	_, token := e.TenantToken(t, "slowacme")
	createApp(t, e, token, "web")

	tm.ReadHeader, tm.Read, tm.Write, tm.Idle = 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond
	srv := tm.Server(e.Server.Handler())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	addr := l.Addr().String()

	servetest.DropsSlowLoris(t, addr, 20*time.Second)
	servetest.DropsIdle(t, addr, api.Prefix+"/healthz", 20*time.Second)

	// A followed stream keeps going past the write timeout.
	resp := streamAt(t, t.Context(), "http://"+addr, "/apps/web/logs?follow=true&tail=0", token)
	sc := bufio.NewScanner(resp.Body)
	start := time.Now()
	for i := 0; time.Since(start) < 10*tm.Write; i++ {
		text := fmt.Sprint("line ", i)
		select {
		case e.Logs.Follow() <- api.LogLine{Time: time.Now(), Process: "web", Text: text}:
		case <-time.After(30 * time.Second):
			t.Fatalf("nobody followed the logs within 30s")
		}
		if !sc.Scan() {
			t.Fatalf("the stream ended after %d lines, %s in: %v", i, time.Since(start), sc.Err())
		}
		var line api.LogLine
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil || line.Text != text {
			t.Fatalf("followed %s (%v), want %q", sc.Bytes(), err, text)
		}
	}
}
