package dashboard

import (
	"encoding/json"
	"fmt"
	"html/template"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	"bex.co/bex/web/api/apiclient"
)

// pageNames are the templates under templates/, each rendered inside
// layout.html.
var pageNames = []string{"signin", "apps", "app", "release", "build", "logs", "console", "upgrade", "audit", "tenants", "tenant", "error", "team", "tokens", "join"}

func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"ago":     ago,
		"took":    took,
		"short":   func(s string) string { return s[:min(len(s), 8)] },
		"version": func(v string) string { return strings.TrimPrefix(v, "v") },
		"deref": func(p *string) string {
			if p == nil {
				return ""
			}
			return *p
		},
		"utc":          func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
		"lower":        strings.ToLower,
		"state":        instanceBadge,
		"run":          runStateOf,
		"command":      func(args []string) string { return strings.Join(args, " ") },
		"details":      auditDetails,
		"can":          can,
		"roles":        func() []string { return tenantRoles },
		"releasesHref": releasesHref,
	}
	pages := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", path.Join("templates", name+".html"))
		if err != nil {
			return nil, fmt.Errorf("parsing the %s page: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// instanceBadge is the badge class of an instance's state: green when
// up, red when crashed or unhealthy, grey on its way in or out.
func instanceBadge(state string) string {
	switch state {
	case apiclient.InstanceUp:
		return "ready"
	case apiclient.InstanceCrashed, apiclient.InstanceUnhealthy:
		return "failed"
	}
	return "pending"
}

// auditDetails writes an audit entry's details as key=value pairs, by
// key, leaving out nulls and empty strings: "ended=exited exitCode=0
// run=3". A value that is not a string or a number stays JSON; details
// that are not an object are written as they are.
func auditDetails(raw json.RawMessage) string {
	var m map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return string(raw)
	}
	pairs := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := string(m[k])
		var s string
		switch {
		case v == "null" || v == `""`:
			continue
		case json.Unmarshal(m[k], &s) == nil:
			v = s
		}
		pairs = append(pairs, k+"="+v)
	}
	return strings.Join(pairs, " ")
}

// tenantRoles are a tenant's roles, from the least powerful.
var tenantRoles = []string{"viewer", "developer", "admin"}

// can reports whether a member of role may do what need may: the page
// offers a form only to those the API would let through.
func can(role, need string) bool {
	r, n := slices.Index(tenantRoles, role), slices.Index(tenantRoles, need)
	return r >= 0 && n >= 0 && r >= n
}

// ago says how long before now t was, roughly.
func ago(t time.Time) string {
	d := time.Since(t)
	switch {
	case t.IsZero():
		return ""
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d.Hours()))
	default:
		return t.UTC().Format("2006-01-02")
	}
}

// took says how long from start to end (or until now while running).
func took(start time.Time, end *time.Time) string {
	e := time.Now()
	if end != nil {
		e = *end
	}
	return e.Sub(start).Round(time.Second).String()
}
