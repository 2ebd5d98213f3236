// Package storagetest is the shared test suite for implementations of
// certmagic.Storage: Run checks the rules written on certmagic's Storage and
// Locker interfaces (v0.25.6), each as a subtest, against a Backend that the
// implementation's test provides.
//
// The suite is proven against the reference implementation, certmagic's own
// FileStorage (see this package's test): a check that FileStorage fails is a
// wrong check. Rules the reference does not keep (FileStorage ignores
// contexts in Store and Load, and its Unlock removes any holder's lock) are
// not checked here but by the implementation's own tests.
//
// What it hands out is Run and Backend; it imports nothing of bex, so any
// certmagic Storage can use it.
package storagetest
