package app

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"bex.co/bex/web/api/apiclient"
)

// metricsRows is how many of the last points bex metrics shows as rows.
const metricsRows = 10

func newMetricsCommand(st *state) *cobra.Command {
	var since string
	cmd := &cobra.Command{
		Use:   "metrics [APP]",
		Short: "Show an app's CPU, memory, restarts and request latency (p50/p99 from the edge) over the last hour",
		Long: "metrics shows the app's series as the platform samples them every 10 seconds: the CPU its instances use (in\n" +
			"cores) and their memory, read by the runtime, the restarts of crashed instances, and the requests the edge\n" +
			"served with their 5xx and p50/p99 latency. A summary of --since (at most 1h) comes first, then the last\n" +
			"points; - marks what was not measured (CPU and memory on a kube cluster). -o json prints every point.\n" +
			"Without APP, the app of the git checkout's remote named bex.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, c, err := st.namedAppClient(cmd.Context(), args)
			if err != nil {
				return err
			}
			m, err := c.Metrics(cmd.Context(), name, since)
			if err != nil {
				return explain(err)
			}
			return st.render(m, func(w io.Writer) error { return st.renderMetrics(w, m) })
		},
	}
	cmd.Flags().StringVar(&since, "since", "", "How far back: a duration from 10s to 1h (default 1h)")
	return cmd
}

// renderMetrics writes a summary of the series, then its last points.
func (st *state) renderMetrics(w io.Writer, m apiclient.AppMetrics) error {
	span := time.Duration(m.SinceSeconds * float64(time.Second))
	if len(m.Points) == 0 {
		_, err := fmt.Fprintf(w, "No metrics of %s over the last %s: %s\n", m.App, span, m.Note)
		return err
	}
	var cpuMax, p99Max float64
	var memMax int64
	var requests, errors uint64
	restarts := 0
	for _, p := range m.Points {
		if p.CPUCores != nil {
			cpuMax = max(cpuMax, *p.CPUCores)
		}
		if p.MemoryBytes != nil {
			memMax = max(memMax, *p.MemoryBytes)
		}
		if p.P99Seconds != nil {
			p99Max = max(p99Max, *p.P99Seconds)
		}
		requests += p.Requests
		errors += p.Errors
		restarts += p.Restarts
	}
	if _, err := fmt.Fprintf(w, "%s over the last %s: CPU peak %s cores, memory peak %s, %d restarts, %d requests (%d 5xx), p99 peak %s\n",
		m.App, span, anyOr(m.Points, func(p apiclient.MetricPoint) bool { return p.CPUCores != nil }, strconv.FormatFloat(cpuMax, 'f', 2, 64)),
		anyOr(m.Points, func(p apiclient.MetricPoint) bool { return p.MemoryBytes != nil }, mebibytes(memMax)),
		restarts, requests, errors, anyOr(m.Points, func(p apiclient.MetricPoint) bool { return p.P99Seconds != nil }, millis(p99Max))); err != nil {
		return err
	}
	if m.Note != "" {
		if _, err := fmt.Fprintf(w, "Note: %s\n", m.Note); err != nil {
			return err
		}
	}
	last := m.Points[max(len(m.Points)-metricsRows, 0):]
	rows := make([][]string, 0, len(last))
	for _, p := range last {
		rows = append(rows, []string{
			p.Time.UTC().Format("15:04:05"),
			optional(p.CPUCores, func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }),
			optional(p.MemoryBytes, mebibytes),
			strconv.Itoa(p.Instances), strconv.Itoa(p.Restarts),
			strconv.FormatUint(p.Requests, 10), strconv.FormatUint(p.Errors, 10),
			optional(p.P50Seconds, millis), optional(p.P99Seconds, millis),
		})
	}
	return st.table([]string{"TIME", "CPU", "MEMORY", "INSTANCES", "RESTARTS", "REQUESTS", "5XX", "P50", "P99"}, rows)
}

// optional formats *v, or "-" when nil.
func optional[T any](v *T, format func(T) string) string {
	if v == nil {
		return "-"
	}
	return format(*v)
}

// anyOr is s when some point has the value, else "-".
func anyOr(points []apiclient.MetricPoint, has func(apiclient.MetricPoint) bool, s string) string {
	for _, p := range points {
		if has(p) {
			return s
		}
	}
	return "-"
}

// mebibytes writes a size in MiB: "48.2MiB".
func mebibytes(b int64) string { return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) + "MiB" }

// millis writes seconds as milliseconds: "12.5ms".
func millis(s float64) string { return strconv.FormatFloat(s*1000, 'f', 1, 64) + "ms" }
