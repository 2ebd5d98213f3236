package gitserver

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/format/pktline"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/sideband"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// Fuzz targets of what a git client sends the receiver: the pkt-lines, the
// receive-pack commands ("<old> <new> <ref>\0<caps>", then the pack) and the
// upload-pack wants and haves. go-git decodes the pkt-lines and commands; the
// targets send arbitrary bodies through the receiver's real HTTP handler, so
// that they exercise what bex does with whatever go-git lets through.

// fuzzMaxPush is the push limit of the fuzzed receivers: small, so that the
// over-limit path is reached by inputs of fuzzing size.
const fuzzMaxPush = 4 << 10

// fuzzRepo is a repository the fuzz targets start each input from: acme's
// app web with one commit on main, pushed by the real git client, and the
// request bodies git sent to make it and then to change it.
type fuzzRepo struct {
	template string // a copy of the bare repository after the first push
	main     string // the commit main points at in template
	receive  [][]byte
	upload   [][]byte
}

var (
	fuzzRepoOnce sync.Once
	fuzzRepoVal  *fuzzRepo
	fuzzRepoErr  error
)

// sharedFuzzRepo makes the fuzzRepo once per process: the fuzzing engine
// runs each target's function again in every worker.
func sharedFuzzRepo(tb testing.TB) *fuzzRepo {
	tb.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		tb.Skip("git not installed")
	}
	fuzzRepoOnce.Do(func() { fuzzRepoVal, fuzzRepoErr = makeFuzzRepo() })
	if fuzzRepoErr != nil {
		tb.Fatal(fuzzRepoErr)
	}
	return fuzzRepoVal
}

func makeFuzzRepo() (*fuzzRepo, error) {
	// The directory outlives the test that made it: the targets share it.
	dir, err := os.MkdirTemp("", "bex-gitfuzz-")
	if err != nil {
		return nil, err
	}
	fr := &fuzzRepo{template: filepath.Join(dir, "template")}
	srv, err := newFuzzServer(filepath.Join(dir, "repos"))
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	capture := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			plain := body
			if r.Header.Get("Content-Encoding") == "gzip" {
				if zr, err := gzip.NewReader(bytes.NewReader(body)); err == nil {
					if b, err := io.ReadAll(zr); err == nil {
						plain = b
					}
				}
			}
			mu.Lock()
			if strings.HasSuffix(r.URL.Path, serviceReceivePack) {
				fr.receive = append(fr.receive, plain)
			} else {
				fr.upload = append(fr.upload, plain)
			}
			mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		srv.HTTPHandler().ServeHTTP(w, r)
	})
	hs := httptest.NewServer(capture)
	defer hs.Close()
	remote := strings.Replace(hs.URL, "http://", "http://git:"+acmeToken+"@", 1) + "/acme/web.git"

	home := filepath.Join(dir, "home")
	work := filepath.Join(dir, "work")
	for _, d := range []string{home, work} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, err
		}
	}
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(),
			"HOME="+home, "XDG_CONFIG_HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0",
			"GIT_AUTHOR_NAME=Alice", "GIT_AUTHOR_EMAIL=alice@acme.test",
			"GIT_COMMITTER_NAME=Alice", "GIT_COMMITTER_EMAIL=alice@acme.test", "LC_ALL=C", "GIT_PROTOCOL=",
		)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out)), nil
	}
	commit := func(file, content string) error {
		if err := os.WriteFile(filepath.Join(work, file), []byte(content), 0o644); err != nil {
			return err
		}
		if _, err := git("add", file); err != nil {
			return err
		}
		_, err := git("commit", "-q", "-m", "change "+file)
		return err
	}
	steps := []func() error{
		func() error { _, err := git("init", "-q", "-b", "main"); return err },
		func() error { return commit("main.go", "package main\n\nfunc main() {}\n") },
		func() error { _, err := git("push", "-q", remote, "main"); return err },
		func() error {
			head, err := git("rev-parse", "HEAD")
			fr.main = head
			if err != nil {
				return err
			}
			return copyTree(srv.RepoDir("acme", "web"), fr.template)
		},
		func() error { return commit("Procfile", "web: ./web\n") },
		func() error { _, err := git("push", "-q", remote, "main"); return err },
		func() error { _, err := git("push", "-q", remote, "main:feature"); return err },
		func() error { _, err := git("tag", "v1"); return err },
		func() error { _, err := git("push", "-q", remote, "v1"); return err },
		func() error { _, err := git("push", "-q", remote, ":feature"); return err },
		func() error { _, err := git("push", "-q", remote, "main:other", ":v1"); return err },
		func() error { _, err := git("clone", "-q", remote, filepath.Join(dir, "clone")); return err },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return fr, nil
}

func newFuzzServer(root string) (*Server, error) {
	return New(Options{
		Root: root,
		Auth: &fakeAuth{tokens: map[string]Principal{acmeToken: {Tenant: "acme", Actor: "alice@acme"}}},
		Repos: fakeRepos{
			"acme/web": {DeployBranch: "main"},
		},
		Deployer:     &deployer{},
		MaxPushBytes: fuzzMaxPush,
	})
}

// copyTree copies the regular files and directories under src to dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o750)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o640)
	})
}

// snapshot returns every file under dir with a hash of its content.
func snapshot(tb testing.TB, dir string) map[string][32]byte {
	tb.Helper()
	files := map[string][32]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[strings.TrimPrefix(p, dir)] = sha256.Sum256(b)
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return files
}

func diffSnapshots(before, after map[string][32]byte) []string {
	var diff []string
	for name, sum := range after {
		if old, ok := before[name]; !ok {
			diff = append(diff, "added "+name)
		} else if old != sum {
			diff = append(diff, "changed "+name)
		}
	}
	for name := range before {
		if _, ok := after[name]; !ok {
			diff = append(diff, "removed "+name)
		}
	}
	return diff
}

// fuzzRequest is one smart-HTTP request of the fuzz targets against a fresh
// copy of the template repository.
type fuzzRequest struct {
	srv      *Server
	deployer *deployer
	dir      string
	before   map[string][32]byte
}

func newFuzzRequest(t *testing.T, fr *fuzzRepo) *fuzzRequest {
	root := t.TempDir()
	srv, err := newFuzzServer(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := srv.RepoDir("acme", "web")
	if err := copyTree(fr.template, dir); err != nil {
		t.Fatal(err)
	}
	return &fuzzRequest{srv: srv, deployer: srv.deployer.(*deployer), dir: dir, before: snapshot(t, dir)}
}

func (q *fuzzRequest) post(service string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/acme/web.git/"+service, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/x-"+service+"-request")
	req.SetBasicAuth("git", acmeToken)
	rec := httptest.NewRecorder()
	q.srv.HTTPHandler().ServeHTTP(rec, req)
	return rec
}

func (q *fuzzRequest) ref(t *testing.T, name plumbing.ReferenceName) string {
	t.Helper()
	sto := filesystem.NewStorage(osfs.New(q.dir), cache.NewObjectLRUDefault())
	ref, err := sto.Reference(name)
	switch {
	case errors.Is(err, plumbing.ErrReferenceNotFound):
		return ""
	case err != nil:
		t.Fatalf("reading %s: %v", name, err)
	}
	return ref.Hash().String()
}

// Side-band packet limits: git's LARGE_PACKET_MAX (65520 bytes with the
// length) for side-band-64k, 1000 for side-band; one byte of each payload is
// the band.
const (
	maxSideband64kPayload = pktline.MaxPayloadSize - 1
	maxSidebandPayload    = 1000 - 4 - 1
)

// demux reads a side-band response: each packet within limit, on band 1 or
// 2, up to a flush-pkt that must end it. It returns what came on each band.
func demux(resp []byte, limit int) (report, progress []byte, err error) {
	sc := pktline.NewScanner(bytes.NewReader(resp))
	read := 0
	for sc.Scan() {
		p := sc.Bytes()
		read += 4 + len(p)
		if len(p) == 0 {
			if read != len(resp) {
				return nil, nil, fmt.Errorf("%d bytes after the flush-pkt", len(resp)-read)
			}
			return report, progress, nil
		}
		if len(p)-1 > limit {
			return nil, nil, fmt.Errorf("side-band packet of %d bytes, over the limit of %d", len(p)-1, limit)
		}
		switch p[0] {
		case 1:
			report = append(report, p[1:]...)
		case 2:
			progress = append(progress, p[1:]...)
		default:
			return nil, nil, fmt.Errorf("packet on band %d", p[0])
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	return nil, nil, errors.New("no flush-pkt at the end")
}

// knownStatuses are the report-status reasons the receiver gives.
var knownStatuses = map[string]bool{
	"ok": true, reasonBuildFailed: true, reasonNonFastForward: true, reasonStale: true,
	reasonDeleteDeploy: true, reasonRefName: true, reasonBadRefName: true, reasonMissingObjects: true, reasonUnpacker: true,
	reasonShallow: true,
}

// FuzzReceivePack sends arbitrary bodies to git-receive-pack. Whatever the
// body: the answer is a 200 with well-formed pkt-lines within the side-band
// limits and a report-status for each command when one was asked for; a body
// that does not decode, or whose pack is refused, changes nothing in the
// repository; the deploy branch moves only to a commit the Deployer built;
// and no command is answered "internal error".
func FuzzReceivePack(f *testing.F) {
	fr := sharedFuzzRepo(f)
	for _, b := range fr.receive {
		f.Add(b)
	}
	zero := plumbing.ZeroHash.String()
	cmd := func(old, new, ref, caps string) []byte {
		var buf bytes.Buffer
		enc := pktline.NewEncoder(&buf)
		line := old + " " + new + " " + ref
		if caps != "" {
			line += "\x00" + caps
		}
		_ = enc.EncodeString(line + "\n")
		_ = enc.Flush()
		return buf.Bytes()
	}
	caps := "report-status side-band-64k agent=git/2.43"
	shallow := func(line string, rest []byte) []byte {
		return append(fmt.Appendf(nil, "%04x%s", 4+len(line), line), rest...)
	}
	for _, seed := range [][]byte{
		nil,
		[]byte("0000"),
		[]byte("0004"),
		[]byte("ffff"),
		[]byte("000"),
		[]byte("0009abcde"),
		cmd(zero, fr.main, "refs/heads/main", caps),
		cmd(fr.main, zero, "refs/heads/main", caps),
		cmd(fr.main, zero, "refs/heads/gone", "report-status side-band"),
		cmd(zero, fr.main, "refs/heads/../heads/main", caps),
		cmd(zero, fr.main, "refs/heads/.", caps),
		cmd(zero, fr.main, "refs/heads/a..b", caps),
		cmd(zero, fr.main, "refs/meta/config", caps),
		cmd(zero, fr.main, "HEAD", caps),
		cmd(zero, fr.main, "refs/tags/v2", "report-status"),
		cmd(zero, fr.main, "refs/heads/x", ""),
		append(cmd(zero, strings.Repeat("1", 40), "refs/heads/main", caps), "PACK\x00\x00\x00\x02\x00\x00\x00\x00"...),
		shallow("shallow "+fr.main+"\n", []byte("0000")),
		shallow("shallow "+fr.main+"\n", cmd(fr.main, zero, "refs/heads/gone", caps)),
		shallow("shallow "+fr.main, cmd(zero, fr.main, "refs/tags/v2", caps)),
		shallow("shallow "+strings.Repeat("1", 40)+"\n", cmd(zero, strings.Repeat("1", 40), "refs/heads/main", caps)),
		shallow("shallow "+strings.Repeat("g", 40)+"\n", []byte("0000")),
		append(cmd(zero, strings.Repeat("1", 40), "refs/heads/main", caps), bytes.Repeat([]byte("x"), fuzzMaxPush+1)...),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		q := newFuzzRequest(t, fr)
		rec := q.post(serviceReceivePack, body)
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d, want 200: %s", rec.Code, rec.Body)
		}
		after := snapshot(t, q.dir)
		pushes := q.deployer.pushes()
		if main := q.ref(t, plumbing.Main); main != fr.main {
			if len(pushes) == 0 || pushes[len(pushes)-1].New != main {
				t.Fatalf("main moved from %s to %s, but no build of it ran (builds: %+v)", fr.main, main, pushes)
			}
		}
		for _, p := range pushes {
			if p.Branch != "main" || p.Tenant != "acme" || p.App != "web" {
				t.Fatalf("a build of %+v, want only acme/web's main", p)
			}
		}

		// The request as the receiver reads it: a shallow clone's
		// boundary lines, then what go-git decodes; a request without
		// commands does nothing.
		req := packp.NewReferenceUpdateRequest()
		_, rest, err := readShallow(bytes.NewReader(body))
		if err == nil && rest == nil {
			err = errors.New("no command")
		}
		if err == nil {
			err = req.Decode(rest)
		}
		if err != nil {
			// The body does not decode: nothing was done.
			if d := diffSnapshots(q.before, after); len(d) > 0 || len(pushes) > 0 {
				t.Fatalf("a request that does not decode (%v) changed the repository %v, built %d", err, d, len(pushes))
			}
			return
		}
		resp := rec.Body.Bytes()
		report := resp
		switch {
		case req.Capabilities.Supports(capability.Sideband64k):
			r, _, err := demux(resp, maxSideband64kPayload)
			if err != nil {
				t.Fatalf("side-band-64k answer: %v\n%q", err, resp)
			}
			report = r
		case req.Capabilities.Supports(capability.Sideband):
			r, _, err := demux(resp, maxSidebandPayload)
			if err != nil {
				t.Fatalf("side-band answer: %v\n%q", err, resp)
			}
			report = r
		}
		if !req.Capabilities.Supports(capability.ReportStatus) {
			return
		}
		rs := packp.NewReportStatus()
		if err := rs.Decode(bytes.NewReader(report)); err != nil {
			t.Fatalf("decoding the report-status: %v\n%q", err, report)
		}
		if len(rs.CommandStatuses) != len(req.Commands) {
			t.Fatalf("%d command statuses for %d commands", len(rs.CommandStatuses), len(req.Commands))
		}
		for _, cs := range rs.CommandStatuses {
			if !knownStatuses[cs.Status] {
				t.Fatalf("%s: status %q", cs.ReferenceName, cs.Status)
			}
		}
		if rs.UnpackStatus != "ok" {
			if d := diffSnapshots(q.before, after); len(d) > 0 || len(pushes) > 0 {
				t.Fatalf("a refused pack (%s) changed the repository %v, built %d", rs.UnpackStatus, d, len(pushes))
			}
		}
	})
}

// FuzzUploadPack sends arbitrary bodies to git-upload-pack (a fetch's wants
// and haves): the answer is a 200 and the repository is left as it was.
func FuzzUploadPack(f *testing.F) {
	fr := sharedFuzzRepo(f)
	for _, b := range fr.upload {
		f.Add(b)
	}
	for _, seed := range []string{
		"", "0000", "0004", "0009done",
		"0032want " + fr.main + "\n00000009done\n",
		"0032want " + strings.Repeat("2", 40) + "\n00000009done\n",
		"0032want " + fr.main + "\n0000" + "0032have " + fr.main + "\n0000",
		"0032want " + fr.main + "\n0034shallow " + fr.main + "\n0000",
		"0032want " + fr.main + "\n000ddeepen 1\n0000",
		"0032want " + fr.main + "\n0000000bbogus\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		q := newFuzzRequest(t, fr)
		rec := q.post(serviceUploadPack, body)
		if rec.Code != http.StatusOK {
			t.Fatalf("status %d, want 200: %s", rec.Code, rec.Body)
		}
		if d := diffSnapshots(q.before, snapshot(t, q.dir)); len(d) > 0 {
			t.Fatalf("a fetch changed the repository: %v", d)
		}
	})
}

// FuzzPktLine reads arbitrary bytes with the pkt-line scanner the receiver
// reads every request with: no payload is longer than a pkt-line may be,
// each payload is what its length said, and encoding the payloads again
// gives back the bytes read, up to the first error.
func FuzzPktLine(f *testing.F) {
	for _, seed := range []string{
		"", "0000", "0001", "0004", "0005a", "000aabcdef0000", "FFFF", "fff0", "00zz",
		"0032want 0123456789012345678901234567890123456789\n0000",
		"000eERR denied\n",
		"0006a\n0000000ahello\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		sc := pktline.NewScanner(bytes.NewReader(in))
		var again bytes.Buffer
		enc := pktline.NewEncoder(&again)
		read := 0
		for sc.Scan() {
			p := sc.Bytes()
			if len(p) > pktline.OversizePayloadMax {
				t.Fatalf("payload of %d bytes", len(p))
			}
			var n int
			if _, err := fmt.Sscanf(string(in[read:read+4]), "%04x", &n); err != nil {
				t.Fatalf("scanned a pkt-line with length %q", in[read:read+4])
			}
			switch {
			case n == 0 && len(p) == 0:
				_ = enc.Flush()
			case n == len(p)+4:
				if len(p) <= pktline.MaxPayloadSize {
					_ = enc.Encode(p)
				} else {
					fmt.Fprintf(&again, "%04x%s", n, p)
				}
			default:
				t.Fatalf("length %q, payload of %d bytes", in[read:read+4], len(p))
			}
			read += 4 + len(p)
			if !bytes.EqualFold(again.Bytes(), in[:read]) {
				t.Fatalf("encoded again %q, read %q", again.Bytes(), in[:read])
			}
		}
		if sc.Err() == nil && read != len(in) {
			t.Fatalf("scanning stopped without an error after %d of %d bytes", read, len(in))
		}
	})
}

// sidebandType is the side-band the client asked for and the largest data
// payload of one packet on it.
func sidebandType(band64k bool) (sideband.Type, int) {
	if band64k {
		return sideband.Sideband64k, maxSideband64kPayload
	}
	return sideband.Sideband, maxSidebandPayload
}

// FuzzSidebandWriter writes arbitrary progress and a report through the
// receiver's side-band writer: every packet stays within its band's limit,
// and the client gets back on each band exactly what was written.
func FuzzSidebandWriter(f *testing.F) {
	f.Add([]byte("-----> Building\n"), []byte("000eunpack ok\n0000"), true)
	f.Add([]byte{}, []byte{}, false)
	f.Add(bytes.Repeat([]byte("x"), 3000), []byte("report"), false)
	f.Add(bytes.Repeat([]byte("y"), 70000), bytes.Repeat([]byte("z"), 2*chunk+1), true)
	f.Fuzz(func(t *testing.T, progress, report []byte, band64k bool) {
		var out bytes.Buffer
		band, limit := sidebandType(band64k)
		sw := newSidebandWriter(&out, func() {}, band, true)
		if _, err := sw.Write(progress); err != nil {
			t.Fatal(err)
		}
		if err := sw.finish(func(w io.Writer) error { _, err := w.Write(report); return err }); err != nil {
			t.Fatal(err)
		}
		gotReport, gotProgress, err := demux(out.Bytes(), limit)
		if err != nil {
			t.Fatalf("answer: %v", err)
		}
		if !bytes.Equal(gotReport, report) || !bytes.Equal(gotProgress, progress) {
			t.Fatalf("read back report %d bytes, progress %d bytes; wrote %d and %d", len(gotReport), len(gotProgress), len(report), len(progress))
		}
	})
}
