// Package procstat reads a process's /proc/PID/stat, whose second field,
// the command name in parentheses, may hold spaces and parentheses: the
// fields are counted from its closing parenthesis.
package procstat
