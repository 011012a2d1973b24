package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/config"
	"github.com/loyalty-bridge/loyalty-bridge/internal/flagenv"
)

// contractFlags are the settings shared by schemas, produce and tail: the
// registry (and Kafka) connection with its security settings, and the
// topic names, from the same config sections and variables as run.
type contractFlags struct {
	kafka     config.Kafka
	registry  config.Registry
	topics    config.Topics
	withKafka bool
	b         *flagenv.Binder
}

// define defines the sections' flags, bound to LOYALTY_BRIDGE_*. Flags the
// command defines afterwards (--topic, --key, --max …) come from the command
// line only: an exported LOYALTY_BRIDGE_KEY should not silently re-key
// records.
func (c *contractFlags) define(fs *flag.FlagSet, withKafka bool) {
	c.b, c.withKafka = flagenv.New(fs, config.EnvPrefix), withKafka
	c.registry.Define(c.b)
	if withKafka {
		c.kafka.Define(c.b)
	}
	c.topics.Define(c.b)
	c.b.All()
}

func (c *contractFlags) registryClient() (*sr.Client, error) {
	cl, err := c.registry.Build()
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	return cl, nil
}

// kafkaOpts are the connection options of the command's Kafka client.
func (c *contractFlags) kafkaOpts() ([]kgo.Opt, error) {
	opts, err := c.kafka.Build()
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	return opts, nil
}

// codec looks the bridge's schemas up in the registry (they must have been
// registered) and returns a codec for the configured topics.
func (c *contractFlags) codec(ctx context.Context) (*codec.Codec, error) {
	reg, err := c.registryClient()
	if err != nil {
		return nil, err
	}
	return codec.New(ctx, codec.Options{Registry: reg, Topics: c.topics.Build()})
}

// parse parses args, then the environment, and checks the sections; a
// usage problem becomes exit code 2.
func (c *contractFlags) parse(fs *flag.FlagSet, e env, args []string) error {
	if err := c.b.Parse(args, e.lookup); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &exitError{code: 2, err: err}
	}
	errs := []error{c.registry.Validate(), c.topics.Validate()}
	if c.withKafka {
		errs = append(errs, c.kafka.Validate())
	}
	for _, w := range c.b.Warnings() {
		fmt.Fprintln(e.stderr, "warning:", w)
	}
	if err := errors.Join(errs...); err != nil {
		return &exitError{code: 2, err: err}
	}
	return nil
}

func schemasCommand() command {
	return command{
		summary: "register the Avro schemas, or check them against the registry",
		run:     runSchemas,
	}
}

func runSchemas(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("schemas", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, "usage: loyalty-bridge schemas register|check [flags]")
		fmt.Fprintln(e.stderr, "\n  register  registers schemas/*.avsc under <topic>-value for every input, result and error topic")
		fmt.Fprintln(e.stderr, "  check     checks them against each subject's registered versions under the subject's")
		fmt.Fprintln(e.stderr, "            compatibility level (locally and by the registry); exit 1 naming what fails")
		fmt.Fprintln(e.stderr)
		fs.PrintDefaults()
	}
	var cf contractFlags
	cf.define(fs, false)
	if len(args) == 0 || (args[0] != "register" && args[0] != "check") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			fs.Usage()
			return flag.ErrHelp
		}
		fs.Usage()
		return &exitError{code: 2, err: errors.New("want register or check")}
	}
	sub := args[0]
	if err := cf.parse(fs, e, args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &exitError{code: 2, err: fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	cl, err := cf.registryClient()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	subjects := codec.SubjectsOf(cf.topics.Build())
	if sub == "register" {
		for _, s := range subjects {
			ss, err := cl.CreateSchema(ctx, s.Subject, sr.Schema{Schema: s.Schema, Type: sr.TypeAvro})
			if err != nil {
				return fmt.Errorf("register %s: %w", s.Subject, err)
			}
			fmt.Fprintf(e.stdout, "registered %-45s id %d version %d (%s)\n", s.Subject, ss.ID, ss.Version, s.Contract)
		}
		return nil
	}
	var failed []string
	for _, s := range subjects {
		problems, err := checkSubject(ctx, cl, s)
		if err != nil {
			return fmt.Errorf("check %s: %w", s.Subject, err)
		}
		if len(problems) == 0 {
			fmt.Fprintf(e.stdout, "ok           %s\n", s.Subject)
			continue
		}
		failed = append(failed, s.Subject)
		for _, p := range problems {
			fmt.Fprintf(e.stdout, "INCOMPATIBLE %s: %s\n", s.Subject, p)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("incompatible with the registry: %s", strings.Join(failed, ", "))
	}
	return nil
}

// checkSubject returns why the bridge's schema for s may not be registered
// as the next version of s: the registry's own verdict plus a local
// check under the subject's compatibility level (the local check names the
// field; some registries, and test fakes, answer only yes or no).
func checkSubject(ctx context.Context, cl *sr.Client, s codec.SubjectTopic) ([]string, error) {
	ours, err := avro.ParseWithCache(s.Schema, "", &avro.SchemaCache{})
	if err != nil {
		return nil, err
	}
	versions, err := cl.Schemas(ctx, s.Subject)
	var re *sr.ResponseError
	if errors.As(err, &re) && sr.IsNotFoundError(re.ErrorCode) {
		return nil, nil // a new subject: anything may be registered
	}
	if err != nil {
		return nil, err
	}
	if len(versions) == 0 {
		return nil, nil
	}
	level := sr.CompatBackward
	if res := cl.Compatibility(sr.WithParams(ctx, sr.DefaultToGlobal), s.Subject); len(res) == 1 && res[0].Err == nil {
		level = res[0].Level
	}
	var against []sr.SubjectSchema
	switch level {
	case sr.CompatNone:
	case sr.CompatBackwardTransitive, sr.CompatForwardTransitive, sr.CompatFullTransitive:
		against = versions
	default:
		against = versions[len(versions)-1:]
	}
	backward := level == sr.CompatBackward || level == sr.CompatBackwardTransitive || level == sr.CompatFull || level == sr.CompatFullTransitive
	forward := level == sr.CompatForward || level == sr.CompatForwardTransitive || level == sr.CompatFull || level == sr.CompatFullTransitive
	var problems []string
	compat := avro.NewSchemaCompatibility()
	for _, v := range against {
		theirs, err := avro.ParseWithCache(v.Schema.Schema, "", &avro.SchemaCache{})
		if err != nil {
			problems = append(problems, fmt.Sprintf("version %d does not parse: %v", v.Version, err))
			continue
		}
		if backward {
			if err := compat.Compatible(ours, theirs); err != nil {
				problems = append(problems, fmt.Sprintf("%s: ours cannot read data written with version %d: %v", level, v.Version, err))
			}
		}
		if forward {
			if err := compat.Compatible(theirs, ours); err != nil {
				problems = append(problems, fmt.Sprintf("%s: readers of version %d cannot read ours: %v", level, v.Version, err))
			}
		}
	}
	version := -1
	if level == sr.CompatBackwardTransitive || level == sr.CompatForwardTransitive || level == sr.CompatFullTransitive {
		version = -2
	}
	res, err := cl.CheckCompatibility(ctx, s.Subject, version, sr.Schema{Schema: s.Schema, Type: sr.TypeAvro})
	if err != nil {
		return nil, err
	}
	if !res.Is {
		msg := "the registry says incompatible"
		if len(res.Messages) > 0 {
			msg += ": " + strings.Join(res.Messages, "; ")
		}
		problems = append(problems, msg)
	}
	return problems, nil
}
