package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func newBuildsCommand(st *state) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "builds [APP]",
		Short: "List builds, of one app or of all",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := st.needClient()
			if err != nil {
				return err
			}
			app := ""
			if len(args) == 1 {
				app = args[0]
			}
			builds, err := c.ListBuilds(cmd.Context(), app)
			if err != nil {
				return explain(err)
			}
			return st.render(builds, func(w io.Writer) error {
				if len(builds) == 0 {
					_, err := fmt.Fprintln(w, "No builds yet: push to the app's git remote (bex apps info APP shows it)")
					return err
				}
				rows := make([][]string, 0, len(builds))
				for _, b := range builds {
					took := "-"
					if b.FinishedAt != nil {
						took = b.FinishedAt.Sub(b.StartedAt).Round(time.Second).String()
					}
					status := b.Status
					if b.Error != "" {
						status += ": " + b.Error
					}
					rows = append(rows, []string{b.App, strconv.Itoa(b.Number), orDash(shortCommit(b.Commit)), b.StartedAt.UTC().Format(timeFormat), took, status})
				}
				return st.table([]string{"APP", "BUILD", "COMMIT", "STARTED", "TOOK", "STATUS"}, rows)
			})
		},
	}
	cmd.AddCommand(newBuildsLogCommand(st))
	return cmd
}

// shortCommit is the first 7 characters of a commit's name, as git shows it.
func shortCommit(c string) string { return c[:min(len(c), 7)] }

func newBuildsLogCommand(st *state) *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "log APP [BUILD]",
		Short: "Print a build's output (default: the latest build); -f follows it until the build ends",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			number := 0
			if len(args) == 2 {
				n, err := strconv.Atoi(strings.TrimPrefix(args[1], "#"))
				if err != nil || n < 1 {
					return usagef("build %q: give a build number, as bex builds %s lists them", args[1], args[0])
				}
				number = n
			}
			c, err := st.needClient()
			if err != nil {
				return err
			}
			if st.output != outputJSON {
				return explain(c.BuildLog(cmd.Context(), args[0], number, follow, st.io.Out))
			}
			lines := &jsonLines{enc: jsonEncoder(st.io.Out)}
			if err := c.BuildLog(cmd.Context(), args[0], number, follow, lines); err != nil {
				return explain(err)
			}
			return lines.flush()
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing lines until the build ends")
	return cmd
}

// jsonLines writes each line written to it as a JSON object on a line of
// its own, {"text": line}, as bex logs -o json writes an app's lines.
type jsonLines struct {
	enc     *json.Encoder
	partial []byte
}

func (j *jsonLines) Write(p []byte) (int, error) {
	j.partial = append(j.partial, p...)
	for {
		i := bytes.IndexByte(j.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		if err := j.encode(j.partial[:i]); err != nil {
			return 0, err
		}
		j.partial = j.partial[i+1:]
	}
}

// flush writes the last line, when it has no newline.
func (j *jsonLines) flush() error {
	if len(j.partial) == 0 {
		return nil
	}
	err := j.encode(j.partial)
	j.partial = nil
	return err
}

func (j *jsonLines) encode(line []byte) error {
	return j.enc.Encode(struct {
		Text string `json:"text"`
	}{string(line)})
}
