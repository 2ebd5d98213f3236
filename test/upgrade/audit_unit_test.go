package upgrade

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuditFailures reads the audit logs of two machines as the real-KCP
// scenario leaves them: it counts what they answered and lists, by
// machine, what they refused.
func TestAuditFailures(t *testing.T) {
	dir := t.TempDir()
	write := func(machine string, lines ...string) {
		p := filepath.Join(dir, machine, "root", filepath.FromSlash(strings.TrimPrefix(auditLogPath, "/")))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("cp-a",
		`{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"a1","stage":"ResponseComplete","verb":"list","requestURI":"/apis/resource.k8s.io/v1/devicetaintrules","sourceIPs":["127.0.0.1"],"responseStatus":{"code":200},"stageTimestamp":"2026-12-07T18:00:01.000000Z"}`)
	write("cp-b",
		`{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"b1","stage":"ResponseStarted","verb":"watch","requestURI":"/apis/platform.bex.co/v1alpha1/apps","responseStatus":{"code":200},"stageTimestamp":"2026-12-07T18:00:00.000000Z"}`,
		`{"kind":"Event","apiVersion":"audit.k8s.io/v1","auditID":"b2","stage":"ResponseComplete","verb":"list","requestURI":"/apis/certificates.k8s.io/v1/podcertificaterequests","sourceIPs":["127.0.0.1","127.77.1.12"],"responseStatus":{"code":403,"message":"forbidden"},"stageTimestamp":"2026-12-07T18:00:02.000000Z","annotations":{"authorization.k8s.io/decision":"forbid","authorization.k8s.io/reason":""}}`)
	// A machine without an audit log (deleted, or not yet started) is
	// passed over.
	if err := os.MkdirAll(filepath.Join(dir, "cp-c", "root"), 0o755); err != nil {
		t.Fatal(err)
	}
	logs, err := auditLogs(dir)
	if err != nil {
		t.Fatal(err)
	}
	answered, refused, err := auditFailures(logs)
	if err != nil {
		t.Fatal(err)
	}
	if answered != 2 {
		t.Errorf("answered = %d, want 2 (the completed responses)", answered)
	}
	if len(refused) != 1 {
		t.Fatalf("refused = %q, want the one 403", refused)
	}
	for _, want := range []string{"cp-b:", "list /apis/certificates.k8s.io/v1/podcertificaterequests", "403", "127.77.1.12", "audit ID b2", "authorization.k8s.io/decision=forbid"} {
		if !strings.Contains(refused[0], want) {
			t.Errorf("refused[0] = %q, want it to hold %q", refused[0], want)
		}
	}
}
