// Package appmetrics keeps each app's recent CPU, memory, restarts and
// request latency as series of fixed intervals, in memory, for the API's
// GET /api/v1/apps/{app}/metrics, bex metrics and the dashboard's charts.
//
// A Sampler takes two inputs. The edge hands it every request it served
// for an app (Observe: status and duration), which it counts into the
// current interval's histogram of fixed logarithmic buckets: the interval's
// p50 and p99 are read from it, so that memory does not grow with traffic.
// Every interval (Run, Sample) it reads each app's instances from the
// runtime: their restarts from Status (every driver), their CPU time and
// memory from the driver's runtime.UsageReader when it has one (the
// process driver, from each sandbox's cgroup; the kube driver, from the
// nodes' stats summaries); CPU seconds become cores
// over the interval. Each app keeps a ring of its last Keep points; an app
// the Apps source no longer lists is dropped with its points.
//
// With Options.Saved (internal/store in make run) the series survive a
// restart: Run saves, of every app whose points changed since its last
// save, the points since then, appended to the app's saved series as one
// chunk (the whole series when it has none saved; the others are named
// unchanged and keep theirs), all apps in one transaction, encoded one app
// at a time into one buffer as the store copies them, every SaveInterval
// and when it stops (the series of apps no longer tracked are deleted,
// and the chunks older than an app's points), and Load, called
// before Run, reads back the listed apps' saved points of the last
// Retention. A store that another process saved until now answers
// ErrTookOver: the sampler merges the saved points into its own before it
// saves. Without it a restart of the
// process starts the series again.
//
// Where the edge runs in a process of its own (bex-edge in the cluster
// install), it counts each app's requests in Totals, cumulative since it
// started, served at TotalsPath behind a bearer token; each process that
// samples (every bex-web replica) reads every edge's Totals with an
// EdgeReader and adds the difference since its last read to its Sampler,
// so any number of readers share the edges.
package appmetrics
