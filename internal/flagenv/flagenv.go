package flagenv

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/loyalty-bridge/loyalty-bridge/internal/secretfile"
)

// Binder remembers which environment variable feeds which flag of one
// FlagSet. The zero value is not usable; build one with New.
type Binder struct {
	fs     *flag.FlagSet
	prefix string
	env    map[string]string // flag name → variable name
	secret map[string]bool   // flag name → also read <variable>_FILE
	files  map[string]string // flag name → the <variable>_FILE path its value came from

	warnings []string
	shared   map[string]bool // file keys of other commands' settings
}

// New returns a Binder for fs. Variable names are prefix + the flag name in
// upper case with '-' turned into '_' (prefix "LOYALTY_BRIDGE_" and flag
// "base-url" give LOYALTY_BRIDGE_BASE_URL) unless Env names one explicitly.
func New(fs *flag.FlagSet, prefix string) *Binder {
	return &Binder{fs: fs, prefix: prefix, env: map[string]string{}, secret: map[string]bool{}}
}

// FlagSet is the flag set b binds.
func (b *Binder) FlagSet() *flag.FlagSet { return b.fs }

// VarName is the default variable name for a flag under prefix.
func VarName(prefix, flagName string) string {
	return prefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Env binds the already defined flag name to the environment. variable may
// be empty for the default name. It appends the variable to the flag's usage
// so that -help tells operators about it.
func (b *Binder) Env(name, variable string) {
	f := b.fs.Lookup(name)
	if f == nil {
		// A programming error in the command's own flag table, not input.
		panic("flagenv: no flag " + name)
	}
	if variable == "" {
		variable = VarName(b.prefix, name)
	}
	b.env[name] = variable
	f.Usage += " (env " + variable + ")"
}

// Secret is Env for a secret: the value may also be read from the file named
// by <variable>_FILE. Surrounding white space of the file is trimmed.
func (b *Binder) Secret(name, variable string) {
	b.Env(name, variable)
	b.secret[name] = true
	f := b.fs.Lookup(name)
	f.Usage = strings.TrimSuffix(f.Usage, ")") + " or " + b.env[name] + "_FILE)"
}

// All binds every flag of the set that is not yet bound, under default names.
func (b *Binder) All() {
	b.fs.VisitAll(func(f *flag.Flag) {
		if _, ok := b.env[f.Name]; !ok {
			b.Env(f.Name, "")
		}
	})
}

// Parse parses args and then fills every bound flag that the command line
// did not set from lookup (os.LookupEnv when nil). Every problem is reported
// together, each naming its variable; values are never echoed.
func (b *Binder) Parse(args []string, lookup func(string) (string, bool)) error {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if err := b.fs.Parse(args); err != nil {
		return err
	}
	given := map[string]bool{}
	b.fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	b.warnCommandLine(given)
	return b.applyEnv(given, lookup)
}

// ParseWithFile is Parse plus a YAML configuration file named by the flag
// fileFlag (itself settable from the environment): a flat mapping from flag
// names to values, lists allowed where a flag takes a comma-separated list.
// Precedence: command line, environment, file, default. Unknown keys are
// errors, so a misspelt setting is not silently ignored.
func (b *Binder) ParseWithFile(args []string, lookup func(string) (string, bool), fileFlag string) error {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if err := b.fs.Parse(args); err != nil {
		return err
	}
	given := map[string]bool{}
	b.fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	b.warnCommandLine(given)
	if err := b.applyEnv(given, lookup); err != nil {
		return err
	}
	b.fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	f := b.fs.Lookup(fileFlag)
	if f == nil || f.Value.String() == "" {
		return nil
	}
	return b.applyFile(f.Value.String(), given)
}

// warnCommandLine warns of each secret given on the command line: any
// user of the machine can read a process's arguments (ps,
// /proc/<pid>/cmdline), while its environment is readable by its own user
// only, and a *_FILE by whom its mode says.
func (b *Binder) warnCommandLine(given map[string]bool) {
	names := make([]string, 0, len(given))
	for name := range given {
		if b.secret[name] {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		b.Warn(fmt.Sprintf("--%s is given on the command line, which every user of this machine can read (ps, /proc/<pid>/cmdline); "+
			"set %s_FILE (a file of mode 0400) or %s instead", name, b.env[name], b.env[name]))
	}
}

// applyFile reads the configuration file as a secret file (secretfile.Read):
// it may hold secrets, so it is bounded in size, must be a regular file
// (a FIFO or a device named by mistake is refused, not read), and its mode
// is warned about as a secret file's is when it sets a secret. A file of
// other settings only may be readable by all, as a Kubernetes ConfigMap
// is mounted (0644).
func (b *Binder) applyFile(path string, given map[string]bool) error {
	data, modeWarning, err := secretfile.Read(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if modeWarning != "" {
		var secrets []string
		for _, key := range keys {
			if b.secret[key] && values[key] != nil && values[key] != "" {
				secrets = append(secrets, "--"+key)
			}
		}
		if len(secrets) > 0 {
			b.Warn("config file sets " + strings.Join(secrets, ", ") + ": " + modeWarning)
		}
	}
	var errs []error
	for _, key := range keys {
		if b.fs.Lookup(key) == nil {
			if b.shared[key] {
				continue
			}
			errs = append(errs, fmt.Errorf("config file %s: unknown setting %q", path, key))
			continue
		}
		if given[key] {
			continue
		}
		value, err := scalar(values[key])
		if err != nil {
			errs = append(errs, fmt.Errorf("config file %s: %s: %w", path, key, err))
			continue
		}
		if err := b.fs.Set(key, value); err != nil {
			errs = append(errs, fmt.Errorf("config file %s: invalid value for %s", path, key))
		}
	}
	return errors.Join(errs...)
}

// scalar renders a YAML value as flag text; lists become comma-separated.
func scalar(v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", nil
	case []any:
		parts := make([]string, 0, len(v))
		for _, e := range v {
			s, err := scalar(e)
			if err != nil {
				return "", err
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, ","), nil
	case map[string]any:
		return "", errors.New("nested settings are not supported; use the flag name as key")
	default:
		return fmt.Sprint(v), nil
	}
}

func (b *Binder) applyEnv(given map[string]bool, lookup func(string) (string, bool)) error {
	b.files = nil

	names := make([]string, 0, len(b.env))
	for n := range b.env {
		names = append(names, n)
	}
	sort.Strings(names)

	var errs []error
	for _, name := range names {
		if given[name] {
			continue
		}
		variable := b.env[name]
		value, ok := lookup(variable)
		if !ok && b.secret[name] {
			path, fok := lookup(variable + "_FILE")
			if fok && path != "" {
				data, warning, err := secretfile.Read(path)
				if err != nil {
					errs = append(errs, fmt.Errorf("%s_FILE: %w", variable, err))
					continue
				}
				if warning != "" {
					b.Warn(variable + "_FILE: " + warning)
				}
				value, ok = strings.TrimSpace(string(data)), true
				if b.files == nil {
					b.files = map[string]string{}
				}
				b.files[name] = path
			}
		}
		if !ok {
			continue
		}
		if err := b.fs.Set(name, value); err != nil {
			// The flag package's error quotes the value; a secret must not
			// reach a terminal or log, so say only which variable is wrong.
			errs = append(errs, fmt.Errorf("%s: invalid value for --%s", variable, name))
		}
	}
	return errors.Join(errs...)
}

// ShareFile names settings that a configuration file may hold for other
// commands: such keys are skipped rather than refused, so one file serves
// a command that takes only some of the settings (offsets reads the run
// command's file for its Kafka settings).
func (b *Binder) ShareFile(names ...string) {
	if b.shared == nil {
		b.shared = map[string]bool{}
	}
	for _, n := range names {
		b.shared[n] = true
	}
}

// SecretFile is the path of the <variable>_FILE that secret flag name was
// read from by the last Parse, or "" when the value came from elsewhere (a
// flag, the variable itself, a configuration file) or was not set. A
// caller that must follow a rotated secret re-reads the file (with
// ReadSecretFile) instead of keeping the value.
func (b *Binder) SecretFile(name string) string { return b.files[name] }

// ReadSecretFile reads a secret file as Parse does: bounded in size, and
// with surrounding white space trimmed. Its error names the path, never
// the content.
func ReadSecretFile(path string) (string, error) {
	data, _, err := secretfile.Read(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(data)), nil
}

// Warnings are the problems found while parsing that do not stop it, each
// once: a secret given on the command line, a secret file (or a
// configuration file that sets a secret) that others may read, and what
// sections add with Warn when they validate. Callers log them after
// validating.
func (b *Binder) Warnings() []string { return b.warnings }

// Warn adds a warning for the caller to log (see Warnings), unless it is
// already there: a section that validates twice warns once. A warning
// names settings, never their values.
func (b *Binder) Warn(msg string) {
	if !slices.Contains(b.warnings, msg) {
		b.warnings = append(b.warnings, msg)
	}
}

// Vars returns the bound variables by flag name, and whether each is a
// secret (which also reads <variable>_FILE). Deployment files are checked
// against it, so that a manifest cannot set a variable nothing reads.
func (b *Binder) Vars() map[string]Var {
	out := make(map[string]Var, len(b.env))
	for name, v := range b.env {
		out[name] = Var{Name: v, Secret: b.secret[name]}
	}
	return out
}

// Var is one bound environment variable.
type Var struct {
	Name   string
	Secret bool
}
