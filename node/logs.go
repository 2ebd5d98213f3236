package node

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"bex.co/bex/internal/lines"
)

// Containers' output is kept as the kubelet keeps it, one file a run of a
// container in the CRI log format ("TIME STREAM F|P LINE"), under
// StateDir/pods/NS_POD_UID/CONTAINER/RESTARTS.log. A file that passes
// maxLogFile is rotated once (.1), so a container's output takes at most
// twice that; a line longer than lines.DefaultMax (16 KiB) is cut into
// partial lines.
const (
	maxLogFile = 10 << 20
)

// logStore keeps the containers' log files.
type logStore struct {
	dir string

	mu   sync.Mutex
	live map[string]bool // files being written
}

func (s *logStore) podDir(namespace, name string, uid types.UID) string {
	return filepath.Join(s.dir, namespace+"_"+name+"_"+string(uid))
}

// open creates the log file of one run of a container, or opens it to
// go on with it (cont), for a container an earlier agent ran.
func (s *logStore) open(pod *corev1.Pod, container string, restarts int32, cont bool) (*logFile, error) {
	dir := filepath.Join(s.podDir(pod.Namespace, pod.Name, pod.UID), container)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, strconv.Itoa(int(restarts))+".log")
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if cont {
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return nil, err
	}
	var size int64
	if st, err := f.Stat(); err == nil {
		size = st.Size()
	}
	s.mu.Lock()
	if s.live == nil {
		s.live = map[string]bool{}
	}
	s.live[path] = true
	s.mu.Unlock()
	return &logFile{store: s, path: path, f: f, size: size}, nil
}

func (s *logStore) isLive(path string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live[path]
}

// remove removes the logs of a Pod that is gone.
func (s *logStore) remove(pod *corev1.Pod) error {
	return os.RemoveAll(s.podDir(pod.Namespace, pod.Name, pod.UID))
}

// logFile is the log of one run of a container.
type logFile struct {
	store *logStore
	path  string

	mu      sync.Mutex
	f       *os.File
	size    int64
	writers []*lines.Writer
}

// stream returns the writer of one of the process's streams.
func (l *logFile) stream(name string) io.Writer {
	w := &lines.Writer{Emit: func(line []byte, partial bool) { l.write(name, line, partial) }}
	l.mu.Lock()
	l.writers = append(l.writers, w)
	l.mu.Unlock()
	return w
}

func (l *logFile) write(stream string, line []byte, partial bool) {
	tag := "F"
	if partial {
		tag = "P"
	}
	rec := fmt.Appendf(nil, "%s %s %s %s\n", time.Now().UTC().Format(time.RFC3339Nano), stream, tag, line)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return
	}
	if l.size+int64(len(rec)) > maxLogFile {
		l.f.Close()
		os.Rename(l.path, l.path+".1")
		f, err := os.OpenFile(l.path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			l.f = nil
			return
		}
		l.f, l.size = f, 0
	}
	n, _ := l.f.Write(rec)
	l.size += int64(n)
}

// Close writes what is left of unfinished lines and closes the file.
func (l *logFile) Close() error {
	l.mu.Lock()
	ws := l.writers
	l.mu.Unlock()
	for _, w := range ws {
		w.Flush()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.store.mu.Lock()
	delete(l.store.live, l.path)
	l.store.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// logRequest is what a /containerLogs request asks for (the kubelet's
// query parameters).
type logRequest struct {
	follow, previous, timestamps bool
	tailLines, limitBytes        int64 // -1: all
	since                        time.Time
	// stream is the one stream asked for, as the log file names it
	// (stdout, stderr); empty for both.
	stream string
}

func parseLogRequest(q map[string][]string) (logRequest, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	r := logRequest{tailLines: -1, limitBytes: -1}
	r.follow, r.previous, r.timestamps = get("follow") == "true", get("previous") == "true", get("timestamps") == "true"
	for k, dst := range map[string]*int64{"tailLines": &r.tailLines, "limitBytes": &r.limitBytes} {
		if v := get(k); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return r, fmt.Errorf("%s must be a non-negative integer, not %q", k, v)
			}
			*dst = n
		}
	}
	if v := get("sinceSeconds"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return r, fmt.Errorf("sinceSeconds must be a positive integer, not %q", v)
		}
		r.since = time.Now().Add(-time.Duration(n) * time.Second)
	}
	if v := get("sinceTime"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return r, fmt.Errorf("sinceTime must be an RFC 3339 time, not %q", v)
		}
		r.since = t
	}
	// The kubelet's stream (PodLogsQuerySplitStreams), and its rule that
	// a stream of its own is not asked with tailLines.
	switch v := get("stream"); v {
	case "", corev1.LogStreamAll:
	case corev1.LogStreamStdout, corev1.LogStreamStderr:
		if r.tailLines >= 0 {
			return r, fmt.Errorf("tailLines cannot be asked with stream %s: ask for %s without tailLines, or for stream %s", v, v, corev1.LogStreamAll)
		}
		r.stream = strings.ToLower(v)
	default:
		return r, fmt.Errorf("stream must be %s, %s or %s, not %q", corev1.LogStreamAll, corev1.LogStreamStdout, corev1.LogStreamStderr, v)
	}
	return r, nil
}

// runFiles returns the log files of a container's runs, oldest first.
func runFiles(dir string) []string {
	entries, _ := os.ReadDir(dir)
	type run struct {
		n    int
		path string
	}
	var runs []run
	for _, e := range entries {
		num, ok := strings.CutSuffix(e.Name(), ".log")
		if n, err := strconv.Atoi(num); ok && err == nil {
			runs = append(runs, run{n, filepath.Join(dir, e.Name())})
		}
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].n < runs[j].n })
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.path
	}
	return out
}

// servedWorker returns the worker of the Pod a request names, or answers
// 404 and returns nil when none runs it.
func (a *Agent) servedWorker(w http.ResponseWriter, ns, name string) *podWorker {
	wk := a.worker(ns, name)
	if wk == nil {
		http.Error(w, fmt.Sprintf("pod %s/%s is not running on node %s", ns, name, a.opts.NodeName), http.StatusNotFound)
	}
	return wk
}

// serveLogs serves /containerLogs/NS/POD/CONTAINER.
func (a *Agent) serveLogs(w http.ResponseWriter, r *http.Request) {
	ns, name, container := r.PathValue("ns"), r.PathValue("pod"), r.PathValue("container")
	req, err := parseLogRequest(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	wk := a.servedWorker(w, ns, name)
	if wk == nil {
		return
	}
	pod := wk.pod()
	runs := runFiles(filepath.Join(a.logs.podDir(ns, name, pod.UID), container))
	if req.previous {
		if len(runs) < 2 {
			http.Error(w, fmt.Sprintf("previous terminated container %q in pod %q not found", container, name), http.StatusBadRequest)
			return
		}
		runs = runs[:len(runs)-1]
		req.follow = false
	}
	if len(runs) == 0 {
		http.Error(w, fmt.Sprintf("container %q in pod %q is waiting to start", container, name), http.StatusBadRequest)
		return
	}
	path := runs[len(runs)-1]
	w.Header().Set("Content-Type", "text/plain")
	out := &limitWriter{w: w, left: req.limitBytes}
	if err := a.copyLog(r.Context(), out, path, req); err != nil && r.Context().Err() == nil {
		a.opts.Log.Error(err, "Serving a container's log", "path", path)
	}
}

// copyLog writes a log file's lines as a request asks: the last tailLines
// of them since a time, with or without their timestamps; with follow, the
// lines written after, until the run ends.
func (a *Agent) copyLog(ctx context.Context, w io.Writer, path string, req logRequest) error {
	var kept [][]byte
	var offset int64
	for _, p := range []string{path + ".1", path} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if p == path {
			offset = int64(len(b))
		}
		for _, line := range bytes.SplitAfter(b, []byte("\n")) {
			if out, ok := formatLine(line, req); ok {
				kept = append(kept, out)
			}
		}
	}
	if req.tailLines >= 0 && int64(len(kept)) > req.tailLines {
		kept = kept[int64(len(kept))-req.tailLines:]
	}
	flusher, _ := w.(http.Flusher)
	for _, l := range kept {
		if _, err := w.Write(l); err != nil {
			return err
		}
	}
	if flusher != nil {
		flusher.Flush()
	}
	if !req.follow {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return err
	}
	rd := bufio.NewReader(f)
	var pending []byte
	for {
		// Whatever a run wrote before it ended is read by the pass
		// that follows the end.
		live := a.logs.isLive(path)
		for {
			chunk, err := rd.ReadBytes('\n')
			pending = append(pending, chunk...)
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			if out, ok := formatLine(pending, req); ok {
				if _, err := w.Write(out); err != nil {
					return err
				}
				if flusher != nil {
					flusher.Flush()
				}
			}
			pending = pending[:0]
		}
		if !live {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// formatLine turns a CRI log line into what the client gets: the text,
// with its time first when asked, a newline at the end unless the line was
// cut; ok is false for a line before req.since, of a stream not asked
// for, an unfinished one (no newline yet) or one not in the format.
func formatLine(l []byte, req logRequest) ([]byte, bool) {
	l, whole := bytes.CutSuffix(l, []byte("\n"))
	if !whole {
		return nil, false
	}
	parts := bytes.SplitN(l, []byte(" "), 4)
	if len(parts) < 3 {
		return nil, false
	}
	ts, err := time.Parse(time.RFC3339Nano, string(parts[0]))
	if err != nil {
		return nil, false
	}
	if !req.since.IsZero() && ts.Before(req.since) || req.stream != "" && string(parts[1]) != req.stream {
		return nil, false
	}
	var text []byte
	if len(parts) == 4 {
		text = parts[3]
	}
	var out []byte
	if req.timestamps {
		out = append(append(out, parts[0]...), ' ')
	}
	out = append(out, text...)
	if string(parts[2]) != "P" {
		out = append(out, '\n')
	}
	return out, true
}

// limitWriter stops writing after left bytes (-1: no limit).
type limitWriter struct {
	w    io.Writer
	left int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.left < 0 {
		return l.w.Write(p)
	}
	if l.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.w.Write(p)
	l.left -= int64(n)
	return n, err
}

func (l *limitWriter) Flush() {
	if f, ok := l.w.(http.Flusher); ok {
		f.Flush()
	}
}

// apiHandler is the agent's API: its health, the containers' logs,
// attach sessions and the stats summary, for clients the apiserver
// authorizes (nodeSubresource, nodeVerb).
func (a *Agent) apiHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	mux.HandleFunc("GET /containerLogs/{ns}/{pod}/{container}", a.serveLogs)
	mux.HandleFunc("GET /stats/summary", a.serveSummary)
	mux.HandleFunc("GET /attach/{ns}/{pod}/{container}", a.serveAttach)
	mux.HandleFunc("POST /attach/{ns}/{pod}/{container}", a.serveAttach)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, fmt.Sprintf("bex-node does not serve %s (it serves /containerLogs, /attach, /stats/summary and /healthz)", r.URL.Path), http.StatusNotFound)
	})
	return a.authorize(mux)
}

// authorize lets through the requests of clients the apiserver allows to
// get the Node's subresource the path maps to (nodeSubresource; healthz
// aside), as the kubelet's webhook authorization does: the client
// certificate's common name is the user, its organizations the groups.
func (a *Agent) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			next.ServeHTTP(w, r)
			return
		}
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		cert := r.TLS.PeerCertificates[0]
		user, groups := cert.Subject.CommonName, cert.Subject.Organization
		sub, verb := nodeSubresource(r.URL.Path), nodeVerb(r)
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Resource: "nodes", Subresource: sub, Name: a.opts.NodeName},
		}}
		res, err := a.opts.Client.AuthorizationV1().SubjectAccessReviews().Create(r.Context(), sar, metav1.CreateOptions{})
		if err != nil {
			a.opts.Log.Error(err, "Authorizing a request")
			http.Error(w, "authorization failed: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if !res.Status.Allowed {
			http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource=%s)", user, verb, sub), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// nodeVerb is the verb a client needs on the Node's subresource for r:
// create for an attach, whatever its method (a WebSocket's is GET, and
// the session writes to a process), else the method's, as the kubelet
// maps them.
func nodeVerb(r *http.Request) string {
	if strings.HasPrefix(r.URL.Path, "/attach/") {
		return "create"
	}
	switch r.Method {
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		return "delete"
	}
	return "get"
}

// nodeSubresource is the Node subresource a client needs to get for path,
// as the kubelet maps its paths: nodes/stats for /stats and under it,
// nodes/proxy for the rest (the container logs among them).
func nodeSubresource(path string) string {
	if path == "/stats" || strings.HasPrefix(path, "/stats/") {
		return "stats"
	}
	return "proxy"
}
