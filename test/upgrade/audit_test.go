package upgrade

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
)

// The real-KCP scenario's machines audit the tenant's requests, so that a
// failure says which apiserver answered it and why (the authorizer's
// reason, the addresses the request came through). The policy reaches
// each machine as a kubeadmConfigSpec file; both paths are a node's,
// under the machine's directory on this machine (root/), which goes with
// the machine: only the machines left at the end keep their audit log.
const (
	auditPolicyPath = "/etc/kubernetes/audit/tenant-policy.yaml"
	auditLogPath    = "/var/log/kubernetes/audit.log"
)

// tenantAudit returns the files and kube-apiserver flags that audit the
// tenant's requests, at the Metadata level, on every control-plane
// machine.
func tenantAudit() ([]bootstrapv1.File, []bootstrapv1.Arg) {
	policy := fmt.Sprintf(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  users: [%q]
- level: None
`, tenantUser)
	policyPath, logPath := auditPolicyPath, auditLogPath
	return []bootstrapv1.File{{Path: auditPolicyPath, Permissions: "0600", Content: policy}},
		[]bootstrapv1.Arg{{Name: "audit-policy-file", Value: &policyPath}, {Name: "audit-log-path", Value: &logPath}}
}

// auditLogs returns the audit log of every machine under machinesDir that
// has one, by machine name.
func auditLogs(machinesDir string) (map[string]string, error) {
	// A machine's node paths are under root/ in its directory.
	paths, err := filepath.Glob(filepath.Join(machinesDir, "*", "root", filepath.FromSlash(strings.TrimPrefix(auditLogPath, "/"))))
	if err != nil {
		return nil, err
	}
	logs := map[string]string{}
	for _, p := range paths {
		rel, err := filepath.Rel(machinesDir, p)
		if err != nil {
			return nil, err
		}
		machine, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
		logs[machine] = p
	}
	return logs, nil
}

// auditFailures reads the machines' audit logs (auditLogs): how many of
// the tenant's requests they answered, and those answered with a status of
// 400 or more, one line each, in time order.
func auditFailures(logs map[string]string) (answered int, refused []string, err error) {
	type line struct {
		at   time.Time
		text string
	}
	var lines []line
	for machine, p := range logs {
		err := eachAuditEvent(p, func(e *auditv1.Event) {
			if e.Stage != auditv1.StageResponseComplete || e.ResponseStatus == nil {
				return
			}
			if answered++; e.ResponseStatus.Code < 400 {
				return
			}
			var ann []string
			for k, v := range e.Annotations {
				ann = append(ann, k+"="+v)
			}
			slices.Sort(ann)
			lines = append(lines, line{e.StageTimestamp.Time, fmt.Sprintf("%s %s: %s %s answered %d %q from %v (audit ID %s; %s)",
				e.StageTimestamp.Format(time.StampMilli), machine, e.Verb, e.RequestURI, e.ResponseStatus.Code,
				e.ResponseStatus.Message, e.SourceIPs, e.AuditID, strings.Join(ann, ", "))})
		})
		if err != nil {
			return 0, nil, err
		}
	}
	slices.SortFunc(lines, func(a, b line) int { return a.at.Compare(b.at) })
	for _, l := range lines {
		refused = append(refused, l.text)
	}
	return answered, refused, nil
}

func eachAuditEvent(path string, fn func(*auditv1.Event)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		e := &auditv1.Event{}
		if err := json.Unmarshal(sc.Bytes(), e); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		fn(e)
	}
	return sc.Err()
}
