// Package wheeltest writes minimal pure-Python wheels, for tests and
// benchmarks that install a requirement with pip on a machine that reaches
// no package index: pip installs them from a local directory
// (PIP_FIND_LINKS with PIP_NO_INDEX), as from an operator's wheel mirror.
package wheeltest
