package node

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/util/exec"

	"bex.co/bex/internal/sandbox"
)

func TestParseAttachRequest(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  attachRequest
		err   string
	}{
		{query: "input=true&output=true&error=true", want: attachRequest{stdin: true, stdout: true, stderr: true}},
		{query: "input=1&output=1&tty=1&error=1", want: attachRequest{stdin: true, stdout: true, tty: true}},
		{query: "output=false&tty=true", err: "at least one of"},
		{query: "stdin=1&stdout=1", err: "at least one of"},
		{query: "", err: "at least one of"},
	} {
		r := httptest.NewRequest("POST", "/attach/ns/pod/c?"+tc.query, nil)
		got, err := parseAttachRequest(r.URL.Query())
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, want %q", tc.query, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.query, got, err, tc.want)
		}
	}
}

// TestReadSize: sizes are read one a line; a zero one sizes nothing; a
// message past maxResizeMessage ends the stream.
func TestReadSize(t *testing.T) {
	in := `{"Width":132,"Height":50}` + "\n" + `{"Width":0,"Height":0}` + "\n" + `{"Width":` + strings.Repeat(" ", 2*maxResizeMessage) + "1}\n"
	r := bufio.NewReaderSize(strings.NewReader(in), maxResizeMessage)
	if sz, err := readSize(r); err != nil || sz == nil || *sz != (sandbox.TerminalSize{Cols: 132, Rows: 50}) {
		t.Errorf("first size: %+v, %v; want 132x50", sz, err)
	}
	if sz, err := readSize(r); err != nil || sz != nil {
		t.Errorf("a zero size: %+v, %v; want none", sz, err)
	}
	if _, err := readSize(r); err == nil {
		t.Error("a message past the bound was read")
	}
}

func TestNodeVerb(t *testing.T) {
	for _, tc := range []struct{ method, path, want string }{
		{"GET", "/containerLogs/ns/pod/c", "get"},
		{"GET", "/attach/ns/pod/c", "create"},
		{"POST", "/attach/ns/pod/c", "create"},
		{"POST", "/exec/ns/pod/c", "create"},
		{"GET", "/stats/summary", "get"},
	} {
		if got := nodeVerb(httptest.NewRequest(tc.method, tc.path, nil)); got != tc.want {
			t.Errorf("%s %s: %s, want %s", tc.method, tc.path, got, tc.want)
		}
	}
}

// TestAttachProtocol speaks to serveAttach with client-go's SPDY executor,
// a process standing in for the container's: what the client sends comes
// back on stdout, a line on stderr, the exit code on the error stream;
// the process waits for the first attach.
func TestAttachProtocol(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pod", UID: "u1"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Stdin: true, StdinOnce: true}}}}
	a := &Agent{opts: Options{NodeName: "n", Log: testr.New(t)}, workers: map[types.UID]*podWorker{}}
	w := newPodWorker(a, pod)
	a.workers[pod.UID] = w
	p := newAttachPoint(pod.Spec.Containers[0])
	w.setAttach(p)
	go func() {
		<-p.first // held until the attach
		in, out := io.Pipe()
		p.start(out, nil)
		io.WriteString(p.output(false), "ready\n")
		b, _ := io.ReadAll(in)
		p.output(false).Write(b)
		io.WriteString(p.output(true), "done\n")
		p.end(3)
	}()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /attach/{ns}/{pod}/{container}", a.serveAttach)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	u, _ := url.Parse(srv.URL + "/attach/ns/pod/c?input=1&output=1&error=1")
	ex, err := remotecommand.NewSPDYExecutor(&rest.Config{Host: srv.URL}, http.MethodPost, u)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader("hello\n"), Stdout: &stdout, Stderr: &stderr})
	var exit exec.CodeExitError
	if !errors.As(err, &exit) || exit.Code != 3 || stdout.String() != "ready\nhello\n" || stderr.String() != "done\n" {
		t.Errorf("attach: %v, stdout %q, stderr %q; want exit 3, ready hello, done", err, stdout.String(), stderr.String())
	}
}
