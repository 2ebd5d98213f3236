package app

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

func newAdminQuotaSetCommand(st *state) *cobra.Command {
	return &cobra.Command{
		Use:   "set TENANT KEY=VALUE... [KEY=default]",
		Short: "Set or clear a tenant's quotas; the others stay as they are",
		Long: "set overrides the platform's default of each quota given, for one tenant; KEY=default gives the tenant the default again.\n" +
			"Keys: " + strings.Join(apiclient.QuotaKeys(), ", ") + ".\n" +
			"Counts are whole numbers; repoBytes and memory are sizes with their unit (32Gi, 512Mi); cpu is CPUs (16, 2.5) or millicores (2500m).\n" +
			"A quota lowered below what the tenant has takes nothing away: only what comes next is refused.\n" +
			"Only the quotas given are sent: the others keep what they have, whoever set them, so two operators\n" +
			"setting different quotas of one tenant at once both keep theirs.",
		Example: "  bex admin quota set acme apps=40 memory=64Gi cpu=32\n  bex admin quota set acme memory=default",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usagef("give the quotas to set as KEY=VALUE after the tenant, such as apps=40 or memory=default")
			}
			changes, err := parseQuotaSettings(args[1:])
			if err != nil {
				return err
			}
			c, err := st.needClient()
			if err != nil {
				return err
			}
			p := apiclient.QuotaPatch{}
			for _, kv := range changes {
				if err := p.Set(kv[0], kv[1]); err != nil {
					return quotaInputError(err)
				}
			}
			q, err := c.PatchTenantQuota(cmd.Context(), args[0], p)
			if err != nil {
				return explain(err)
			}
			return st.render(q, func(w io.Writer) error {
				if _, err := fmt.Fprintf(w, "Set the quotas of tenant %s.\n\n", q.Tenant); err != nil {
					return err
				}
				return renderAdminQuota(w, q)
			})
		},
	}
}

// parseQuotaSettings reads KEY=VALUE arguments, each key once, and checks
// each value as SetQuota reads it, before anything is asked of the API.
func parseQuotaSettings(args []string) ([][2]string, error) {
	var changes [][2]string
	seen := map[string]bool{}
	var check apiclient.QuotaOverrides
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return nil, usagef("%q: give KEY=VALUE, such as apps=40 or memory=default", a)
		}
		if strings.TrimSpace(v) == "" {
			return nil, usagef("%q: give quota %s a value, or default", a, k)
		}
		if seen[k] {
			return nil, usagef("quota %s is given twice: give it once", k)
		}
		seen[k] = true
		if err := check.SetQuota(k, v); err != nil {
			return nil, quotaInputError(err)
		}
		changes = append(changes, [2]string{k, v})
	}
	return changes, nil
}

// quotaInputError is a quota value bex cannot read: a usage error naming
// the quota as its field.
func quotaInputError(err error) error {
	var qe *apiclient.QuotaInputError
	if errors.As(err, &qe) {
		return &Error{Kind: KindUsage, Message: qe.Error(), Field: qe.Key}
	}
	return err
}
