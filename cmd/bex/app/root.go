package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"bex.co/bex/cmd/internal/command"
	"bex.co/bex/web/api/apiclient"
)

// IO is what the commands read and write and where they find their
// configuration. Zero fields take the process's defaults where there are
// any.
type IO struct {
	Out io.Writer
	Err io.Writer
	In  io.Reader
	// ConfigDir is the directory under which bex/config.json lives; empty
	// means os.UserConfigDir().
	ConfigDir string
	// Getenv reads BEX_API and BEX_TOKEN, which override the saved
	// configuration; nil reads nothing.
	Getenv func(string) string
	// HTTPClient calls the API; nil means http.DefaultClient.
	HTTPClient *http.Client
	// Dir is the working directory, whose git remote named bex gives the
	// app of commands that take [APP]; empty means the process's.
	Dir string
	// OpenURL opens a URL in the user's browser (bex open); nil means the
	// desktop's opener (openInBrowser). It returns ErrNoBrowser when there
	// is none.
	OpenURL func(ctx context.Context, url string) error
}

// Output formats.
const (
	outputTable = "table"
	outputJSON  = "json"
)

// state is what every command uses, put in place by the root command's
// PersistentPreRunE before any RunE.
type state struct {
	io     IO
	output string // outputTable or outputJSON

	configPath string
	config     Config
	// client is the API client of the saved configuration; nil when there
	// is none (then needClient says what to do).
	client *apiclient.Client
}

// NewCommand returns the bex command with every subcommand.
func NewCommand(streams IO) *cobra.Command {
	if streams.Out == nil {
		streams.Out = io.Discard
	}
	if streams.Err == nil {
		streams.Err = io.Discard
	}
	if streams.Getenv == nil {
		streams.Getenv = func(string) string { return "" }
	}
	if streams.OpenURL == nil {
		streams.OpenURL = openInBrowser(streams.Getenv)
	}
	st := &state{io: streams}
	root := &cobra.Command{
		Use:   "bex",
		Short: "bex: push code, get a running app",
		Long: "bex talks to a bex platform's API: create apps, push to their git remote, and follow builds,\n" +
			"releases, env and logs. Start with: bex login --api URL --token TOKEN",
		SilenceUsage:  true,
		SilenceErrors: true,
		// A word that is no command is refused as a usage error; bex alone
		// prints the help.
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q: bex --help lists the commands", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return st.setUp()
		},
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.Err)
	if streams.In != nil {
		root.SetIn(streams.In)
	}
	root.PersistentFlags().StringVarP(&st.output, "output", "o", outputTable, "output format: table or json")
	root.AddCommand(
		newLoginCommand(st),
		newAppsCommand(st),
		newBuildsCommand(st),
		newReleasesCommand(st),
		newRollbackCommand(st),
		newRestartCommand(st),
		newScaleCommand(st),
		newRunCommand(st),
		newRunsCommand(st),
		newEnvCommand(st),
		newLogsCommand(st),
		newKeysCommand(st),
		newMembersCommand(st),
		newTokensCommand(st),
		newRoutesCommand(st),
		newQuotaCommand(st),
		newAdminCommand(st),
		newUpgradeCommand(st),
		newFleetCommand(st),
		newPsCommand(st),
		newMetricsCommand(st),
		newOpenCommand(st),
	)
	command.CobraUsage(root)
	usageArgs(root)
	return root
}

// usageArgs makes the argument errors of cmd and of every command under it
// (a missing APP, one too many) usage errors that show the command's
// usage line.
func usageArgs(cmd *cobra.Command) {
	if check := cmd.Args; check != nil && cmd.HasParent() {
		cmd.Args = func(c *cobra.Command, args []string) error {
			if err := check(c, args); err != nil {
				return usagef("%v; usage: %s", err, c.UseLine())
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		usageArgs(sub)
	}
}

// Run runs bex with args and returns the process's exit code: 0, or the
// exit code of the error's kind (ErrorOf), having written the error to
// streams.Err: "bex: message", or with -o json a JSON object {"error":
// {"kind", "status", "message", "field", "quota"}} that scripts can act
// on.
func Run(ctx context.Context, streams IO, args []string) int {
	if streams.Err == nil {
		streams.Err = io.Discard
	}
	cmd := NewCommand(streams)
	cmd.SetArgs(append([]string{}, args...))
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	// bex run ends with the command's own status; the command said what
	// it had to.
	var es *command.ExitStatus
	if errors.As(err, &es) {
		return es.Code
	}
	asJSON := false
	if f := cmd.PersistentFlags().Lookup("output"); f != nil && f.Value.String() == outputJSON {
		asJSON = true
	}
	writeError(streams.Err, err, asJSON || askedForJSON(args))
	return ErrorOf(err).ExitCode()
}

// askedForJSON says whether args ask for -o json, for a command line
// refused before its flags were all read.
func askedForJSON(args []string) bool {
	for i, a := range args {
		switch {
		case a == "--":
			return false
		case a == "-ojson", a == "-o=json", a == "--output=json":
			return true
		case (a == "-o" || a == "--output") && i+1 < len(args) && args[i+1] == outputJSON:
			return true
		}
	}
	return false
}

// setUp checks the flags and loads the configuration and the client.
func (st *state) setUp() error {
	if st.output != outputTable && st.output != outputJSON {
		return usagef("-o %s: want table or json", st.output)
	}
	path, err := configFile(st.io.ConfigDir)
	if err != nil {
		return err
	}
	st.configPath = path
	if st.config, err = loadConfig(path); err != nil {
		return err
	}
	if v := st.io.Getenv("BEX_API"); v != "" {
		st.config.API = v
	}
	if v := st.io.Getenv("BEX_TOKEN"); v != "" {
		st.config.Token = v
	}
	if st.config.API != "" && st.config.Token != "" {
		if st.client, err = apiclient.New(st.config.API, st.config.Token, st.io.HTTPClient); err != nil {
			return fmt.Errorf("%w (in %s or BEX_API): run bex login --api URL --token TOKEN", err, path)
		}
	}
	return nil
}

// errNotLoggedIn is what commands say without a configuration.
var errNotLoggedIn = &Error{Kind: KindUnauthenticated, Message: "not logged in: run `bex login --api URL --token TOKEN` (or set BEX_API and BEX_TOKEN)"}

// needClient returns the API client, or says how to get one.
func (st *state) needClient() (*apiclient.Client, error) {
	if st.client == nil {
		return nil, errNotLoggedIn
	}
	return st.client, nil
}

// explain turns an error of the API client into one that says what to do;
// it still wraps the API's answer, whose status gives the exit code.
func explain(err error) error {
	if err == nil {
		return nil
	}
	var apiErr *apiclient.Error
	var netErr *net.OpError
	switch {
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusUnauthorized:
		return &explained{msg: "the token was refused: check it or ask your operator for a new one, then run `bex login --api URL --token TOKEN`", err: apiErr}
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusForbidden:
		return &explained{msg: "not allowed: " + apiErr.Message, err: apiErr}
	case errors.As(err, &apiErr):
		return apiErr
	case errors.As(err, &netErr):
		return fmt.Errorf("%w: is the API running, and is the URL from bex login right?", err)
	}
	return err
}

// explained is an error said again in words that say what to do.
type explained struct {
	msg string
	err error
}

func (e *explained) Error() string { return e.msg }
func (e *explained) Unwrap() error { return e.err }

// jsonEncoder writes JSON values to w as bex prints them: <, > and & as
// they are, not escaped for HTML as encoding/json's default does (a
// value of "a<b" prints "a<b", not "a\u003cb").
func jsonEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}

// printJSON writes v as indented JSON.
func (st *state) printJSON(v any) error {
	enc := jsonEncoder(st.io.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes rows under a header, in aligned columns.
func (st *state) table(header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(st.io.Out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// render writes v as JSON with -o json, otherwise calls text.
func (st *state) render(v any, text func(w io.Writer) error) error {
	if st.output == outputJSON {
		return st.printJSON(v)
	}
	return text(st.io.Out)
}

// orDash returns s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// timeFormat is how tables show times: UTC, to the minute.
const timeFormat = "2006-01-02 15:04"
