package app

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	goruntime "runtime"

	"github.com/spf13/cobra"
)

// ErrNoBrowser is what IO.OpenURL returns when there is no browser to
// open a URL in: bex open then prints the URL.
var ErrNoBrowser = errors.New("no browser to open a URL in")

func newOpenCommand(st *state) *cobra.Command {
	var printOnly bool
	cmd := &cobra.Command{
		Use:   "open [APP]",
		Short: "Open the app's URL in the browser; --print, or no browser, prints it",
		Long: "open opens the app's default URL, https://<app>-<tenant>.<domain> (as heroku open does: custom hostnames are\n" +
			"listed by bex routes list), with xdg-open (open on macOS). Without a display or an opener, or with --print, it\n" +
			"prints the URL; with -o json it prints the app, as bex apps info does, and opens nothing.\n" +
			"Without APP, the app of the git checkout's remote named bex.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, c, err := st.namedAppClient(cmd.Context(), args)
			if err != nil {
				return err
			}
			app, err := c.GetApp(cmd.Context(), name)
			if err != nil {
				return explain(err)
			}
			if st.output == outputJSON {
				return st.printJSON(app)
			}
			if !printOnly {
				err := st.io.OpenURL(cmd.Context(), app.URL)
				if err == nil {
					_, err = fmt.Fprintf(st.io.Out, "Opening %s in the browser.\n", app.URL)
					return err
				}
				if !errors.Is(err, ErrNoBrowser) {
					return fmt.Errorf("opening %s: %w (bex open --print prints the URL)", app.URL, err)
				}
			}
			_, err = fmt.Fprintln(st.io.Out, app.URL)
			return err
		},
	}
	cmd.Flags().BoolVar(&printOnly, "print", false, "print the URL instead of opening it")
	return cmd
}

// openInBrowser returns the desktop's opener of URLs: open on macOS, and
// elsewhere xdg-open when there is a display (DISPLAY or WAYLAND_DISPLAY
// in getenv). Without one it returns ErrNoBrowser. The browser is left
// running.
func openInBrowser(getenv func(string) string) func(context.Context, string) error {
	return func(_ context.Context, url string) error {
		name := "xdg-open"
		if goruntime.GOOS == "darwin" {
			name = "open"
		} else if getenv("DISPLAY") == "" && getenv("WAYLAND_DISPLAY") == "" {
			return ErrNoBrowser
		}
		path, err := exec.LookPath(name)
		if err != nil {
			return ErrNoBrowser
		}
		// Not tied to a context: the browser outlives bex.
		cmd := exec.Command(path, url)
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("starting %s: %w", name, err)
		}
		return cmd.Process.Release()
	}
}
