package acmetest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// newOrderPath is where pebble v2.10.3 takes new orders (wfe.newOrderPath).
const newOrderPath = "/order-plz"

// orderCounter is the reverse proxy clients reach the ACME directory
// through. It passes every request to pebble unchanged, keeping the Host
// header so that the URLs pebble hands out point back at the proxy, and
// counts, per DNS name, the new-order requests pebble answered with 201
// Created. Pebble does not log an order's names, so this is where they are
// seen.
type orderCounter struct {
	proxy *httputil.ReverseProxy
	log   io.Writer

	mu     sync.Mutex
	counts map[string]int
}

func newOrderCounter(pebble *url.URL, transport http.RoundTripper, log io.Writer) *orderCounter {
	c := &orderCounter{log: log, counts: map[string]int{}}
	c.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(pebble)
			pr.Out.Host = pr.In.Host
		},
		Transport: transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			fmt.Fprintf(log, "acmetest: proxying %s %s to pebble: %v\n", r.Method, r.URL.Path, err)
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	return c
}

func (c *orderCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != newOrderPath {
		c.proxy.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "reading request: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := &statusRecorder{ResponseWriter: w}
	c.proxy.ServeHTTP(rec, r)
	if rec.status != http.StatusCreated {
		return
	}
	names, err := orderNames(body)
	if err != nil {
		fmt.Fprintf(c.log, "acmetest: pebble accepted an order whose names cannot be read: %v\n", err)
		return
	}
	c.mu.Lock()
	for _, n := range names {
		c.counts[n]++
	}
	c.mu.Unlock()
	fmt.Fprintf(c.log, "acmetest: pebble accepted an order for %s\n", strings.Join(names, ", "))
}

// count returns how many accepted orders named the DNS name.
func (c *orderCounter) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[strings.ToLower(strings.TrimSuffix(name, "."))]
}

// orderNames returns the distinct DNS names, lowercased, of a new-order
// request: a flattened JWS whose payload lists the identifiers.
func orderNames(jws []byte) ([]string, error) {
	var msg struct {
		Payload string `json:"payload"`
	}
	if err := json.Unmarshal(jws, &msg); err != nil {
		return nil, fmt.Errorf("decoding JWS: %w", err)
	}
	payload, err := base64.RawURLEncoding.DecodeString(msg.Payload)
	if err != nil {
		return nil, fmt.Errorf("decoding JWS payload: %w", err)
	}
	var order struct {
		Identifiers []struct {
			Type  string `json:"type"`
			Value string `json:"value"`
		} `json:"identifiers"`
	}
	if err := json.Unmarshal(payload, &order); err != nil {
		return nil, fmt.Errorf("decoding order: %w", err)
	}
	var names []string
	for _, id := range order.Identifiers {
		if id.Type != "dns" {
			continue
		}
		if n := strings.ToLower(id.Value); !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names, nil
}

// statusRecorder remembers the status code written through it.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
