package platformtest

import (
	"net/http"
	"slices"
	"strings"
	"sync"
)

// SecretLists records the requests that list or watch Secrets with their
// data: GETs of a collection of Secrets that do not ask for their metadata
// only (PartialObjectMetadataList). A controller manager that makes none
// holds no Secret's data in its cache. Wrap a rest.Config's transport with
// Wrap (rest.Config.Wrap); it is safe for concurrent use.
type SecretLists struct {
	mu   sync.Mutex
	reqs []string
}

// Wrap returns rt, recording the requests that list or watch Secrets with
// their data.
func (s *SecretLists) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/secrets") &&
			!strings.Contains(req.Header.Get("Accept"), "as=PartialObjectMetadata") {
			s.mu.Lock()
			s.reqs = append(s.reqs, req.URL.String())
			s.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// Requests returns the URLs of the requests recorded so far.
func (s *SecretLists) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
