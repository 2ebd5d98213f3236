// Package embedded_test runs bex-embedded (what make run starts) as a user
// would: it waits for the env file, uses the kubeconfig it names, stops the
// platform with Ctrl-C and starts it again.
package embedded_test
