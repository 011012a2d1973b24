package config

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/flagenv"
	"github.com/loyalty-bridge/loyalty-bridge/internal/pipeline"
)

// EnvPrefix is the prefix of every variable the service reads: --brokers is
// LOYALTY_BRIDGE_BROKERS.
const EnvPrefix = "LOYALTY_BRIDGE_"

// Section is one group of settings. Each also has a Define that puts its
// flags on a flagenv.Binder (API's takes a flag prefix besides) and a
// Build that returns the options of the package it configures.
type Section interface {
	Validate() error
}

// Config is everything the bridge-running commands (run, replay, dev) are
// told, in sections. Build it with Define and a flagenv parse, then call
// Validate.
type Config struct {
	Kafka      Kafka
	Registry   Registry
	Topics     Topics
	Group      Group
	API        API
	Partner    Partner
	Processing Processing
	Delivery   Delivery
	Ledger     Ledger
	Parking    Parking
	Ops        Ops
	Tracing    Tracing
	// RegisterSchemas registers the bridge's schemas at start-up.
	RegisterSchemas bool
	// File is --config, the YAML file read by Binder.ParseWithFile.
	File string
}

// SettingError is a setting that passed Validate but cannot be used when
// it is built: a file it names is missing or unreadable, a certificate or
// key does not parse. Its message names the flag; commands report it as a
// usage error, as they report Validate's.
type SettingError struct{ Err error }

func (e *SettingError) Error() string { return e.Err.Error() }
func (e *SettingError) Unwrap() error { return e.Err }

// MissingError is a setting that a command needs before it connects and
// that was not given: the partner API's address and credentials, SASL's
// user and password. A configuration lacking only these can still be
// shown (run --print-config), so that an operator can write the file
// first and add the secrets where they belong (a *_FILE, a Secret).
type MissingError struct{ msg string }

func (e *MissingError) Error() string { return e.msg }

// missing is a MissingError formatted as fmt.Errorf formats.
func missing(format string, args ...any) error {
	return &MissingError{msg: fmt.Sprintf(format, args...)}
}

// OnlyMissing reports whether err, as Validate returns it, holds
// MissingErrors and nothing else.
func OnlyMissing(err error) bool {
	if err == nil {
		return false
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !OnlyMissing(e) {
				return false
			}
		}
		return true
	}
	var m *MissingError
	return errors.As(err, &m)
}

// settingError makes a Build's error a *SettingError.
func settingError(err *error) {
	if *err != nil {
		*err = &SettingError{Err: *err}
	}
}

// Vars returns every environment variable the configuration reads, by flag
// name.
func Vars() map[string]flagenv.Var {
	fs := flag.NewFlagSet("vars", flag.ContinueOnError)
	_, b := Define(fs)
	return b.Vars()
}

// Define defines every section's flags on fs with their defaults and binds
// each to its environment variable. Parse with
// b.ParseWithFile(args, lookup, "config").
func Define(fs *flag.FlagSet) (*Config, *flagenv.Binder) {
	return DefineWith(fs, Defaults{})
}

// Defaults are a command's own defaults where they differ from run's.
type Defaults struct {
	// MaxInFlight: replay is gentler on the partner than the live bridge.
	MaxInFlight int
	// LogLevel: an operator command's stderr is for its progress and
	// warnings; the service's info lines (tokens obtained, circuit
	// changes) would bury them. "" is run's (info).
	LogLevel string
}

// DefineWith is Define with a command's own defaults.
func DefineWith(fs *flag.FlagSet, d Defaults) (*Config, *flagenv.Binder) {
	c := &Config{}
	c.Processing.defaultMaxInFlight = d.MaxInFlight
	c.Ops.defaultLogLevel = d.LogLevel
	b := flagenv.New(fs, EnvPrefix)
	c.Kafka.Define(b)
	c.Group.Define(b)
	c.Topics.Define(b)
	c.Registry.Define(b)
	fs.BoolVar(&c.RegisterSchemas, "register-schemas", false, "register the bridge's schemas at start-up (otherwise they must already be registered)")
	c.Processing.Define(b)
	c.Delivery.Define(b)
	c.Ledger.Define(b)
	c.Parking.Define(b)
	c.Ops.Define(b)
	c.Tracing.Define(b)
	c.API.Define(b, "api-")
	c.Partner.Define(b, EnvPrefix)
	c.Partner.DefineLegacy(b)
	fs.StringVar(&c.File, "config", "", "YAML file of settings keyed by flag name (flags and env override it)")
	b.All()
	return c, b
}

// Validate reports every problem of every section at once, each naming its
// flag, before anything connects. It fills derived defaults (auth URL,
// transactional id).
func (c *Config) Validate() error {
	var errs []error
	for _, s := range []Section{&c.Kafka, &c.Group, &c.Topics, &c.Registry, &c.Processing, &c.Delivery, &c.Ops, &c.Tracing, &c.API, &c.Partner} {
		errs = append(errs, s.Validate())
	}
	errs = append(errs, c.Ledger.validate(c.Group.Name))
	errs = append(errs, c.Parking.validate(c.Group.Name, c.Topics.Build().Inputs()))
	errs = append(errs, checkTakeoverWait(c.Processing.TakeoverWait, c.API.Timeout, c.Partner.Profile.ApplyWindow))
	if n, most := c.Delivery.TransactionRecords, c.Processing.Buffered(); n > most {
		errs = append(errs, fmt.Errorf("--transaction-records %d: above --max-buffered (%d), which bounds every record taken and not yet committed", n, most))
	}
	return errors.Join(errs...)
}

// checkTakeoverWait refuses a takeover wait that ends before a previous
// owner's last write can have been applied: it may have started just
// before the takeover, been sent up to the call timeout later, and be
// applied up to the apply window after that. 0 is the default, which
// covers both.
func checkTakeoverWait(wait, call, window time.Duration) error {
	if wait > 0 && wait < call+window {
		return fmt.Errorf("--takeover-wait %v: below --api-timeout (%v) plus --partner-apply-window (%v), %v: "+
			"a previous owner's last write may be applied after the guard looked for it", wait, call, window, call+window)
	}
	return nil
}

// Pipeline returns the consumer pipeline's options that the configuration
// sets: group, topics, processing and delivery. The caller adds the
// handler, client options, logger and observer.
func (c *Config) Pipeline() pipeline.Options {
	o := c.Processing.Build()
	c.Delivery.Apply(&o)
	o.Brokers, o.Group, o.Topics = c.Kafka.BrokerList(), c.Group.Name, c.Topics.Build().Inputs()
	// Handlers call the partner: a takeover waits for a previous owner's
	// last attempt (pipeline.Options.TakeoverWait), and a member calls
	// only while its group session outlasts an attempt (its lease).
	o.CallTimeout = c.API.Timeout
	o.ApplyWindow = c.Partner.Profile.ApplyWindow
	return o
}

// DefineFile defines --config on a command that composes only some
// sections: the file may be the run command's, so keys of run's other
// settings are skipped rather than refused. Parse with
// b.ParseWithFile(args, lookup, "config").
func DefineFile(b *flagenv.Binder) *string {
	p := new(string)
	b.FlagSet().StringVar(p, "config", "", "YAML file of settings keyed by flag name, such as run's (flags and env override it)")
	names := make([]string, 0, 64)
	for name := range Vars() {
		names = append(names, name)
	}
	b.ShareFile(names...)
	b.Env("config", "")
	return p
}
