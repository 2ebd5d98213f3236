// Package isolation holds the hostile-tenant suite (package
// isolation_test): two tenants on the embedded platform (bex-embedded,
// what make run starts), one of which pushes an app written to attack
// (testdata/attack; the victim runs testdata/victim). From inside its
// sandbox the app reads the platform's state directory, the operator
// token, the edge's CA key, the registry token, the Postgres password,
// another tenant's release and every process's environment; connects to
// etcd, Postgres, the registry, the kube-apiserver, the platform API (its
// operator routes without a token), the git receiver and the edge on
// 127.0.0.1, the sandbox's gateway and every address of the machine, to
// every port listening on the machine, and to the other tenant's instance;
// and goes past its memory, pids, open files, /tmp and app directory
// limits. Every attempt must fail with its reason in the report, and the
// platform and the other tenant's app must still answer afterwards. At
// push time a Procfile or go.mod that links to the operator token fails
// the build without quoting it.
//
// The same attacks run from a build step (testdata/buildattack, a Node app
// whose npm run build compiles and runs testdata/attack), which also reads
// the other tenant's repository and build caches and goes past the build's
// memory, pids, open files and disks (made 256 MiB for the suite): each
// attempt must fail with its reason and the build still be released; a
// build that fills its disk or its memory fails saying so; and the
// attacker's next push works.
//
// The same app runs at the same time on a platform started with
// --unsafe-no-sandbox, where the file attacks (from the app and from the
// build) and the read of the victim's environment succeed: the suite can
// fail.
package isolation
