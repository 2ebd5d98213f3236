// Command testapp is the app the runtime tests deploy: it answers its
// version on "/", 200 on /healthz, and obeys the env knobs of runtimetest
// (VERSION, FAIL_HEALTH, CRASH) and LISTEN_DELAY (a duration to wait
// before it listens, as an app that boots slowly); /sick makes its health check fail from
// then on, /exit makes it exit with status 4, /log?msg= prints msg, /started
// answers when the process started (which tells one process from the next). With the argument "worker" it runs without
// a port until SIGTERM.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	started := time.Now().UnixNano()
	version := os.Getenv("VERSION")
	if os.Getenv("CRASH") == "1" {
		fmt.Fprintln(os.Stderr, "crashing on purpose, version", version)
		os.Exit(3)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		fmt.Println("worker started, version", version)
		<-ctx.Done()
		fmt.Println("worker stopping")
		return
	}
	var sick atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, version)
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if os.Getenv("FAIL_HEALTH") == "1" || sick.Load() {
			http.Error(w, "unhealthy on purpose", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/log", func(w http.ResponseWriter, r *http.Request) {
		out := os.Stdout
		if r.URL.Query().Get("stream") == "stderr" {
			out = os.Stderr
		}
		fmt.Fprintln(out, r.URL.Query().Get("msg"))
		fmt.Fprintln(w, "logged")
	})
	mux.HandleFunc("/started", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, started)
	})
	mux.HandleFunc("/sick", func(w http.ResponseWriter, r *http.Request) {
		sick.Store(true)
		fmt.Fprintln(w, "sick from now on")
	})
	mux.HandleFunc("/exit", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(os.Stderr, "exiting on request, version", version)
		os.Exit(4)
	})
	mux.HandleFunc("/host", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, r.Host, r.Header.Get("X-Forwarded-Host"), r.Header.Get("X-Forwarded-Proto"), r.Header.Get("X-Forwarded-For"))
	})
	srv := &http.Server{Addr: ":" + os.Getenv("PORT"), Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		fmt.Println("shutting down, version", version)
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if d, err := time.ParseDuration(os.Getenv("LISTEN_DELAY")); err == nil {
		time.Sleep(d)
	}
	fmt.Println("listening on port", os.Getenv("PORT"), "version", version)
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
