package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/internal/produce"
)

func produceCommand() command {
	return command{summary: "JSON lines on stdin → Avro records on an input topic", run: runProduce}
}

func runProduce(ctx context.Context, e env, args []string) error {
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	var cf contractFlags
	cf.define(fs, true)
	topic := fs.String("topic", "", "input topic to produce to (required)")
	keyField := fs.String("key-field", "", "take the record key from this JSON field (default: loyaltyId, else externalId, else transactionId)")
	key := fs.String("key", "", "use this literal record key for every line")
	typ := fs.String("type", "", "event type of lines without a \"type\" field (default: the topic's only type)")
	noValidate := fs.Bool("no-validate", false, "send events that fail validation (to test the bridge's VALIDATION path)")
	fs.Usage = func() {
		fmt.Fprintln(e.stderr, `usage: loyalty-bridge produce --topic T [--key-field F | --key K] [flags] < events.jsonl

One event per line, a JSON object with the Avro field names; timestamps are
RFC 3339 strings. On a topic with several event types, "type" names the
record (e.g. {"type":"RedemptionRequested",...}) or --type gives it for all
lines. Bad lines are reported with their line number and skipped; the exit
status is 1 if any line failed.`)
		fmt.Fprintln(e.stderr)
		fs.PrintDefaults()
	}
	if err := cf.parse(fs, e, args); err != nil {
		return err
	}
	switch {
	case *topic == "":
		return &exitError{code: 2, err: errors.New("--topic is required")}
	case *key != "" && *keyField != "":
		return &exitError{code: 2, err: errors.New("--key and --key-field are exclusive")}
	}
	cd, err := cf.codec(ctx)
	if err != nil {
		return err
	}
	if cd.EventTypes(*topic) == nil {
		return &exitError{code: 2, err: fmt.Errorf("--topic %s is not an input topic (%s)", *topic, strings.Join(cf.topics.Build().Inputs(), ", "))}
	}
	cl, err := kafkaClient(&cf.kafka, kgo.RecordDeliveryTimeout(30*time.Second))
	if err != nil {
		return err
	}
	defer cl.Close()
	res, err := produce.Run(ctx, cl, e.stdin, produce.Options{Topic: *topic, Codec: cd, Type: events.EventType(*typ),
		Key: *key, KeyField: *keyField, NoValidate: *noValidate,
		OnError: func(err *produce.LineError) { fmt.Fprintln(e.stderr, err) }})
	var readErr *produce.ReadError
	if err != nil && !errors.As(err, &readErr) {
		return err
	}
	fmt.Fprintf(e.stderr, "produced %d records to %s, %d lines failed\n", res.Produced, *topic, res.Failed)
	switch {
	case readErr != nil:
		return fmt.Errorf("reading stdin after line %d: %w", readErr.Line, readErr.Err)
	case res.Failed > 0:
		return &exitError{code: 1, err: fmt.Errorf("%d lines failed", res.Failed)}
	}
	return nil
}
