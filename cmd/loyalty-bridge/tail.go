package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tail"
)

func tailCommand() command {
	return command{summary: "decode records of any bridge topic to JSON lines on stdout", run: runTail}
}

func runTail(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("tail", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var cf contractFlags
	cf.define(fs, true)
	topic := fs.String("topic", "", "topic to read: an input topic or its .result/.error topic (required)")
	fromBeginning := fs.Bool("from-beginning", false, "start at the earliest offset instead of new records only")
	maxRecords := fs.Int("max", 0, "stop after this many records (0: until interrupted)")
	valuesOnly := fs.Bool("values-only", false, "print only {\"type\":…, <fields>} per record: the input format of produce")
	showPII := fs.Bool("show-pii", false, "print personal data of onboarding events instead of "+events.Redacted+", and the originals error events carry")
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, `usage: loyalty-bridge tail --topic T [--from-beginning] [--max N] [flags]

Prints one JSON object per record: topic, partition, offset, timestamp, key,
headers, schemaId, type and the decoded value (or decodeError). Reads
without a consumer group: nothing is committed.`)
		fmt.Fprintln(e.stderr)
		fs.PrintDefaults()
	}
	if err := cf.parse(fs, e, args); err != nil {
		return err
	}
	switch {
	case *topic == "":
		return &exitError{code: exitUsage, err: errors.New("--topic is required")}
	case *maxRecords < 0:
		return &exitError{code: exitUsage, err: fmt.Errorf("--max %d: must be 0 (no limit) or more", *maxRecords)}
	}
	cd, err := cf.codec(ctx)
	if err != nil {
		return err
	}
	if _, ok := cd.SchemaID(*topic); !ok {
		return &exitError{code: 2, err: fmt.Errorf("--topic %s is not one of the bridge's topics", *topic)}
	}
	cl, err := kafkaClient(&cf.kafka, tail.ClientOpts(*topic, *fromBeginning)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	return tail.Run(ctx, cl, e.stdout, tail.Options{Codec: cd, Max: *maxRecords, ShowPII: *showPII, ValuesOnly: *valuesOnly,
		OnSkip: func(err error) { fmt.Fprintln(e.stderr, err) }})
}
