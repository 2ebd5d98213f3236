// Package lines cuts a process's output into lines for whoever keeps
// them: the process runtime's log buffer and bex-node's CRI log files.
// A Writer emits each line without its newline (and a "\r" before it), cut
// into pieces of at most Max bytes, and Flush emits what is left of a last
// line that had none.
package lines
