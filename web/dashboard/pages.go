package dashboard

import (
	"fmt"
	"html/template"
	"path"
	"slices"
	"strings"
	"time"

	"bex.co/bex/web/api/apiclient"
)

// pageNames are the templates under templates/, each rendered inside
// layout.html.
var pageNames = []string{"signin", "apps", "app", "release", "build", "logs", "console", "upgrade", "audit", "error", "team", "tokens", "join"}

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
		"utc":   func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
		"lower": strings.ToLower,
		"state": instanceBadge,
		"can":   can,
		"roles": func() []string { return tenantRoles },
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
