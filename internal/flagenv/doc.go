// Package flagenv binds a flag.FlagSet to environment variables.
//
// Every operator command of loyalty-bridge takes its settings from flags, and
// each flag may also come from a LOYALTY_BRIDGE_* environment variable so that
// containers can be configured without a command line. Secrets additionally
// accept a <NAME>_FILE variable naming a file that holds the value (Docker and
// Kubernetes secrets are mounted as files), so a secret need never appear in a
// process listing or an environment dump.
//
// Long-running commands also take a YAML file whose keys are the flag names
// (ParseWithFile). Precedence, highest first: the command line, <NAME>,
// <NAME>_FILE, the file, the flag's default. The file may hold secrets, so
// it is read as a secret file is (internal/secretfile: bounded in size, a
// regular file only, its mode warned about when it sets a secret).
//
// A secret given on the command line still works, but is a warning: every
// user of the machine can read a process's arguments, while its
// environment is its own user's. flagenv only parses; it never logs and
// never prints a value. Warnings, its own and those sections add with
// Warn, are for the caller to log.
package flagenv
