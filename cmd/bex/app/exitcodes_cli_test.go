package app_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"bex.co/bex/cmd/bex/app"
	"bex.co/bex/internal/controlplane/cptest"
	"bex.co/bex/web/api/apitest"
)

// bexRun runs bex as its main does (app.Run) with streams' configuration,
// environment and working directory, and returns what it wrote to
// standard output and standard error and its exit code.
func bexRun(t *testing.T, streams app.IO, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	streams.Out, streams.Err = &out, &errOut
	code = app.Run(t.Context(), streams, args)
	return out.String(), errOut.String(), code
}

// TestExitCodesCLI: against the real API, each kind of failure exits with
// its code and says why on standard error, "bex: message" or, with -o
// json, a JSON object with the kind, the API's status and the field or
// quota at fault; standard output stays empty.
func TestExitCodesCLI(t *testing.T) {
	e := apitest.Start(t, cptest.Start(t))
	_, token := e.TenantToken(t, "cliexit")
	tenant := func(k string) string { return map[string]string{"BEX_API": e.URL, "BEX_TOKEN": token}[k] }
	io := app.IO{ConfigDir: t.TempDir(), Getenv: tenant}
	if _, stderr, code := bexRun(t, io, "apps", "create", "shop"); code != 0 {
		t.Fatalf("creating shop: exit %d: %s", code, stderr)
	}
	operator := app.IO{ConfigDir: t.TempDir(), Getenv: func(k string) string {
		return map[string]string{"BEX_API": e.URL, "BEX_TOKEN": e.OperatorToken}[k]
	}}
	wrongToken := app.IO{ConfigDir: t.TempDir(), Getenv: func(k string) string {
		return map[string]string{"BEX_API": e.URL, "BEX_TOKEN": "bex_wrong"}[k]
	}}
	loggedOut := app.IO{ConfigDir: t.TempDir()}

	for _, tc := range []struct {
		name string
		io   app.IO
		args []string
		code int
		// text is the whole of standard error without -o json; want is
		// the error object with it.
		text string
		want app.Error
	}{
		{name: "unknown flag", io: io, args: []string{"apps", "list", "--al"}, code: 2,
			text: "bex: unknown flag: --al\n", want: app.Error{Kind: app.KindUsage, Message: "unknown flag: --al"}},
		{name: "missing argument", io: io, args: []string{"releases"}, code: 2,
			text: "bex: accepts 1 arg(s), received 0; usage: bex releases APP [flags]\n",
			want: app.Error{Kind: app.KindUsage, Message: "accepts 1 arg(s), received 0; usage: bex releases APP [flags]"}},
		{name: "unknown command", io: io, args: []string{"frobnicate"}, code: 2,
			text: "bex: unknown command \"frobnicate\": bex --help lists the commands\n",
			want: app.Error{Kind: app.KindUsage, Message: `unknown command "frobnicate": bex --help lists the commands`}},
		{name: "argument bex cannot read", io: io, args: []string{"scale", "shop", "web=many"}, code: 2,
			text: "bex: \"web=many\": the count of instances is a whole number, such as web=2\n",
			want: app.Error{Kind: app.KindUsage, Message: `"web=many": the count of instances is a whole number, such as web=2`}},
		{name: "flag value bex does not know", io: io, args: []string{"releases", "shop", "--status", "pending"}, code: 2,
			text: "bex: --status \"pending\": give succeeded or failed; comma-separated or repeated\n",
			want: app.Error{Kind: app.KindUsage, Message: `--status "pending": give succeeded or failed; comma-separated or repeated`}},
		{name: "invalid input", io: io, args: []string{"apps", "create", "Bad_Name"}, code: 2,
			text: "bex: app name \"Bad_Name\": must be at most 40 lower-case letters, digits or '-', starting with a letter and ending with a letter or digit (field name)\n",
			want: app.Error{Kind: app.KindInvalid, Status: 422, Field: "name",
				Message: `app name "Bad_Name": must be at most 40 lower-case letters, digits or '-', starting with a letter and ending with a letter or digit`}},
		{name: "not found", io: io, args: []string{"apps", "info", "nope"}, code: 3,
			text: "bex: app \"nope\" not found\n", want: app.Error{Kind: app.KindNotFound, Status: 404, Message: `app "nope" not found`}},
		{name: "conflict", io: io, args: []string{"apps", "create", "shop"}, code: 4,
			text: "bex: app \"shop\" exists already (field name)\n", want: app.Error{Kind: app.KindConflict, Status: 409, Field: "name", Message: `app "shop" exists already`}},
		{name: "refused token", io: wrongToken, args: []string{"apps", "list"}, code: 5,
			text: "bex: the token was refused: check it or ask your operator for a new one, then run `bex login --api URL --token TOKEN`\n",
			want: app.Error{Kind: app.KindUnauthenticated, Status: 401,
				Message: "the token was refused: check it or ask your operator for a new one, then run `bex login --api URL --token TOKEN`"}},
		{name: "not logged in", io: loggedOut, args: []string{"apps", "list"}, code: 5,
			text: "bex: not logged in: run `bex login --api URL --token TOKEN` (or set BEX_API and BEX_TOKEN)\n",
			want: app.Error{Kind: app.KindUnauthenticated, Message: "not logged in: run `bex login --api URL --token TOKEN` (or set BEX_API and BEX_TOKEN)"}},
		{name: "forbidden", io: operator, args: []string{"apps", "list"}, code: 5,
			text: "bex: not allowed: an operator's token acts for no tenant: use a tenant's token\n",
			want: app.Error{Kind: app.KindForbidden, Status: 403, Message: "not allowed: an operator's token acts for no tenant: use a tenant's token"}},
		{name: "quota", io: io, args: []string{"scale", "shop", "web=50"}, code: 5,
			text: "bex: not allowed: the tenant's instancesPerProcess quota (20) is reached: web=50 asks for more instances of one process than any plan runs; ask for 20 or fewer\n",
			want: app.Error{Kind: app.KindForbidden, Status: 403, Quota: "instancesPerProcess",
				Message: "not allowed: the tenant's instancesPerProcess quota (20) is reached: web=50 asks for more instances of one process than any plan runs; ask for 20 or fewer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := bexRun(t, tc.io, tc.args...)
			if code != tc.code || stderr != tc.text || stdout != "" {
				t.Errorf("bex %q: exit %d, stdout %q, stderr\n%s\nwant exit %d, no stdout, stderr\n%s", tc.args, code, stdout, stderr, tc.code, tc.text)
			}
			stdout, stderr, code = bexRun(t, tc.io, append(tc.args, "-o", "json")...)
			var got struct {
				Error app.Error `json:"error"`
			}
			if err := json.Unmarshal([]byte(stderr), &got); err != nil || got.Error != tc.want || code != tc.code || stdout != "" {
				t.Errorf("bex %q -o json: exit %d, stdout %q, stderr %s (%v)\nwant exit %d and the error %+v", tc.args, code, stdout, stderr, err, tc.code, tc.want)
			}
		})
	}
}
