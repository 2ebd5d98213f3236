package apiclient

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"bex.co/bex/internal/units"
)

// QuotaRow is one quota of a Quota as bex quota, bex admin quota, the
// team page and the console show it: the values read as a person reads
// them (cpu in CPUs, sizes in binary units).
type QuotaRow struct {
	// Key is the quota's name as the API's JSON and bex admin quota set
	// spell it; Label says it in words, for pages.
	Key, Label string
	// Limit is the quota in force; Used what the tenant has of it.
	Limit, Used string
	// Default is the platform's quota; Set says the operator set this one
	// for the tenant, and Input is that value as a form or bex admin quota
	// set takes it back (empty when not Set).
	Default string
	Set     bool
	Input   string
	// Give says what a value of this quota is typed as.
	Give string
}

// quotaKind is how a quota's values are typed and read.
type quotaKind int

const (
	quotaCount quotaKind = iota
	quotaBytes
	quotaMilliCPU
)

// quotaField is one quota of Quotas and QuotaOverrides: exactly one of the
// int and the int64 pointers is set.
type quotaField struct {
	key, label  string
	kind        quotaKind
	in, def     *int
	in64, def64 *int64
	over        **int
	over64      **int64
	used        string
}

// fields returns q's quotas in the order they are shown, with pointers
// into q.
func (q *Quota) fields() []quotaField {
	u := q.Usage
	return []quotaField{
		{key: "apps", label: "Apps", in: &q.Quotas.Apps, def: &q.Defaults.Apps, over: &q.Overrides.Apps, used: strconv.Itoa(u.Apps)},
		{key: "routes", label: "Custom routes", in: &q.Quotas.Routes, def: &q.Defaults.Routes, over: &q.Overrides.Routes, used: strconv.Itoa(u.Routes)},
		{key: "concurrentBuilds", label: "Builds at once", in: &q.Quotas.ConcurrentBuilds, def: &q.Defaults.ConcurrentBuilds, over: &q.Overrides.ConcurrentBuilds, used: strconv.Itoa(u.RunningBuilds)},
		{key: "buildMinutes", label: "Build minutes", in: &q.Quotas.BuildMinutes, def: &q.Defaults.BuildMinutes, over: &q.Overrides.BuildMinutes,
			used: fmt.Sprintf("%d since %s", u.BuildMinutes, q.BuildMinutesSince.UTC().Format("2006-01-02"))},
		{key: "repoBytes", label: "Repository size", kind: quotaBytes, in64: &q.Quotas.RepoBytes, def64: &q.Defaults.RepoBytes, over64: &q.Overrides.RepoBytes, used: "checked at each push"},
		{key: "concurrentRuns", label: "One-off runs at once", in: &q.Quotas.ConcurrentRuns, def: &q.Defaults.ConcurrentRuns, over: &q.Overrides.ConcurrentRuns, used: strconv.Itoa(u.RunningRuns)},
		{key: "instances", label: "Instances", in: &q.Quotas.Instances, def: &q.Defaults.Instances, over: &q.Overrides.Instances, used: strconv.Itoa(u.Instances)},
		{key: "cpu", label: "CPU", kind: quotaMilliCPU, in64: &q.Quotas.MilliCPU, def64: &q.Defaults.MilliCPU, over64: &q.Overrides.MilliCPU, used: units.MilliCPU(u.MilliCPU)},
		{key: "memory", label: "Memory", kind: quotaBytes, in64: &q.Quotas.MemoryBytes, def64: &q.Defaults.MemoryBytes, over64: &q.Overrides.MemoryBytes, used: units.Bytes(u.MemoryBytes)},
	}
}

// QuotaKeys are the quotas' names, in the order Rows gives them.
func QuotaKeys() []string {
	var q Quota
	fs := q.fields()
	keys := make([]string, len(fs))
	for i, f := range fs {
		keys[i] = f.key
	}
	return keys
}

func (f quotaField) format(n int64) string {
	switch {
	case f.kind == quotaBytes:
		return units.Bytes(n)
	case f.kind == quotaMilliCPU:
		return units.MilliCPU(n)
	case f.key == "buildMinutes":
		return strconv.FormatInt(n, 10) + " a month"
	}
	return strconv.FormatInt(n, 10)
}

func (f quotaField) give() string {
	switch f.kind {
	case quotaBytes:
		return "a size with its unit, such as 32Gi or 512Mi"
	case quotaMilliCPU:
		return "CPUs, such as 16 or 2.5, or millicores, such as 2500m"
	}
	return fmt.Sprintf("a whole number from 0 to %d", math.MaxInt32)
}

// Rows returns q's quotas, one row each, in the order bex quota prints
// them.
func (q Quota) Rows() []QuotaRow {
	fs := q.fields()
	rows := make([]QuotaRow, len(fs))
	for i, f := range fs {
		r := QuotaRow{Key: f.key, Label: f.label, Used: f.used, Give: f.give()}
		if f.in != nil {
			r.Limit, r.Default = f.format(int64(*f.in)), f.format(int64(*f.def))
			if *f.over != nil {
				r.Set, r.Input = true, strconv.Itoa(**f.over)
			}
		} else {
			r.Limit, r.Default = f.format(*f.in64), f.format(*f.def64)
			if *f.over64 != nil {
				r.Set, r.Input = true, f.input(**f.over64)
			}
		}
		rows[i] = r
	}
	return rows
}

// QuotaInputError is a quota's value that could not be read: Key names the
// quota, and the message says what to type.
type QuotaInputError struct {
	Key     string
	Message string
}

func (e *QuotaInputError) Error() string { return "quota " + e.Key + ": " + e.Message }

// SetQuota sets the override of the quota key in o from value as a person
// types it: a whole number for counts, a size with its unit for repoBytes
// and memory ("32Gi"), CPUs or millicores for cpu ("16", "2500m"). An
// empty value or "default" removes the override. A value that cannot be
// read, a negative one or an unknown key is a *QuotaInputError and leaves
// o as it was.
func (o *QuotaOverrides) SetQuota(key, value string) error {
	var q Quota
	q.Overrides = *o
	value = strings.TrimSpace(value)
	for _, f := range q.fields() {
		if f.key != key {
			continue
		}
		if value == "" || value == "default" {
			if f.over != nil {
				*f.over = nil
			} else {
				*f.over64 = nil
			}
			*o = q.Overrides
			return nil
		}
		switch f.kind {
		case quotaBytes, quotaMilliCPU:
			parse := units.ParseBytes
			if f.kind == quotaMilliCPU {
				parse = units.ParseMilliCPU
			}
			n, err := parse(value)
			if err != nil {
				return &QuotaInputError{Key: key, Message: err.Error()}
			}
			*f.over64 = &n
		default:
			n, err := strconv.ParseInt(value, 10, 64)
			switch {
			case err != nil:
				return &QuotaInputError{Key: key, Message: fmt.Sprintf("%q is not a number: give %s, or default", value, f.give())}
			case n < 0:
				return &QuotaInputError{Key: key, Message: fmt.Sprintf("%q is negative: give %s, or default", value, f.give())}
			case n > math.MaxInt32:
				return &QuotaInputError{Key: key, Message: fmt.Sprintf("%q is more than %d, the largest it may be", value, math.MaxInt32)}
			}
			v := int(n)
			*f.over = &v
		}
		*o = q.Overrides
		return nil
	}
	return &QuotaInputError{Key: key, Message: "no such quota: give one of " + strings.Join(QuotaKeys(), ", ")}
}

// Set puts the quota key into p from value as a person types it, as
// SetQuota reads it: empty or "default" sends null, which gives the tenant
// the default again. A value that cannot be read is a *QuotaInputError and
// leaves p as it was.
func (p QuotaPatch) Set(key, value string) error {
	var q Quota
	if err := q.Overrides.SetQuota(key, value); err != nil {
		return err
	}
	for _, f := range q.fields() {
		if f.key != key {
			continue
		}
		v := "null"
		switch {
		case f.over != nil && *f.over != nil:
			v = strconv.Itoa(**f.over)
		case f.over64 != nil && *f.over64 != nil:
			v = strconv.FormatInt(**f.over64, 10)
		}
		p[key] = json.RawMessage(v)
	}
	return nil
}

// Expect puts into p's expectations (QuotaExpectKey) the override the
// quota key should have now, from value as a person types it and as Set
// reads it: empty or "default" expects none. A value that cannot be read
// is a *QuotaInputError and leaves p as it was.
func (p QuotaPatch) Expect(key, value string) error {
	e := QuotaPatch{}
	if raw, ok := p[QuotaExpectKey]; ok {
		if err := json.Unmarshal(raw, &e); err != nil {
			return fmt.Errorf("the patch's %s: %w", QuotaExpectKey, err)
		}
	}
	if err := e.Set(key, value); err != nil {
		return err
	}
	raw, err := json.Marshal(e)
	if err != nil {
		return err
	}
	p[QuotaExpectKey] = raw
	return nil
}

// QuotaInput returns the override v of the quota key as a form and bex
// admin quota set take it ("96Gi", "2500m", "40"), or "default" for nil.
func QuotaInput(key string, v *int64) string {
	if v == nil {
		return "default"
	}
	var q Quota
	for _, f := range q.fields() {
		if f.key == key {
			return f.input(*v)
		}
	}
	return strconv.FormatInt(*v, 10)
}

// input is n as a form takes it back.
func (f quotaField) input(n int64) string {
	switch f.kind {
	case quotaBytes:
		return units.BytesInput(n)
	case quotaMilliCPU:
		return units.MilliCPUInput(n)
	}
	return strconv.FormatInt(n, 10)
}
