package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"

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

// kafkaClient is an operator command's Kafka client: the section's
// connection options, then opts.
func kafkaClient(k *config.Kafka, opts ...kgo.Opt) (*kgo.Client, error) {
	kopts, err := k.Build()
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	cl, err := kgo.NewClient(append(kopts, opts...)...)
	if err != nil {
		return nil, &exitError{code: 2, err: err}
	}
	return cl, nil
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
	if err := parseFlags(fs, func() error { return c.b.Parse(args, e.lookup) }); err != nil {
		return err
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
	return command{summary: "register the Avro schemas, or check them against the registry", run: runSchemas}
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
		return &exitError{code: exitUsage, err: errors.New("want register or check")}
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
		return err
	}
	if sub == "register" {
		done, err := codec.Register(ctx, cl, cf.topics.Build())
		for _, s := range done {
			fmt.Fprintf(e.stdout, "registered %-45s id %d version %d (%s)\n", s.Subject, s.ID, s.Version, s.Contract)
		}
		return err
	}
	var failed []string
	for _, s := range codec.SubjectsOf(cf.topics.Build()) {
		problems, err := codec.Check(ctx, cl, s)
		if err != nil {
			return err
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
