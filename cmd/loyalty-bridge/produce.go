package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
)

func produceCommand() command {
	return command{
		summary: "JSON lines on stdin → Avro records on an input topic",
		run:     runProduce,
	}
}

// maxLine bounds one JSON line (an event is far smaller).
const maxLine = 1 << 20

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
	in := cd.EventTypes(*topic)
	if in == nil {
		return &exitError{code: 2, err: fmt.Errorf("--topic %s is not an input topic (%s)", *topic, strings.Join(cf.topics.Build().Inputs(), ", "))}
	}
	kopts, err := cf.kafkaOpts()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(kopts,
		kgo.DefaultProduceTopic(*topic),
		kgo.RecordDeliveryTimeout(30*time.Second),
	)...)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	defer cl.Close()

	var (
		mu               sync.Mutex
		produced, failed int
	)
	fail := func(line int, format string, args ...any) {
		mu.Lock()
		failed++
		mu.Unlock()
		fmt.Fprintf(e.stderr, "line %d: %s\n", line, fmt.Sprintf(format, args...))
	}
	sc := bufio.NewScanner(e.stdin)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	line := 0
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 || text[0] == '#' {
			continue
		}
		ev, k, err := parseLine(text, in, *typ, *keyField, *key)
		if err != nil {
			fail(line, "%v", err)
			continue
		}
		if !*noValidate {
			if err := ev.Validate(); err != nil {
				fail(line, "%v", err)
				continue
			}
		}
		value, err := cd.Encode(*topic, ev)
		if err != nil {
			fail(line, "%v", err)
			continue
		}
		n := line
		cl.Produce(ctx, &kgo.Record{Key: k, Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				fail(n, "produce: %v", err)
				return
			}
			mu.Lock()
			produced++
			mu.Unlock()
		})
	}
	scanErr := sc.Err()
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	fmt.Fprintf(e.stderr, "produced %d records to %s, %d lines failed\n", produced, *topic, failed)
	switch {
	case scanErr != nil:
		return fmt.Errorf("reading stdin after line %d: %w", line, scanErr)
	case failed > 0:
		return &exitError{code: 1, err: fmt.Errorf("%d lines failed", failed)}
	}
	return nil
}

// parseLine turns one JSON line into an event of one of the types in, and
// its record key. Errors name fields, never values.
func parseLine(text []byte, in []events.EventType, flagType, keyField, key string) (events.Event, []byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(text, &fields); err != nil {
		return nil, nil, fmt.Errorf("not a JSON object: %v", err)
	}
	t := events.EventType(flagType)
	if raw, ok := fields["type"]; ok {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, nil, errors.New("type: must be a string")
		}
		t = events.EventType(s)
		delete(fields, "type")
	}
	if t == "" {
		if len(in) > 1 {
			return nil, nil, fmt.Errorf("type: required on this topic (one of %s), or pass --type", joinTypes(in))
		}
		t = in[0]
	}
	ok := false
	for _, x := range in {
		ok = ok || x == t
	}
	if !ok {
		return nil, nil, fmt.Errorf("type: %q is not an event of this topic (one of %s)", t, joinTypes(in))
	}
	ev := events.New(t)
	body, _ := json.Marshal(fields)
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(ev); err != nil {
		return nil, nil, fmt.Errorf("%s: %s", t, jsonProblem(err))
	}
	k, err := recordKey(fields, keyField, key)
	if err != nil {
		return nil, nil, err
	}
	return ev, k, nil
}

// jsonProblem rewords encoding/json errors so that they name the field and
// never quote the offending value (which may be personal data).
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%s: must be %s, not a JSON %s", te.Field, jsonKind(te.Type.String()), te.Value)
	}
	var pe *time.ParseError
	if errors.As(err, &pe) {
		return "a timestamp must be an RFC 3339 string, e.g. 2026-11-20T10:30:00Z"
	}
	if msg := err.Error(); strings.HasPrefix(msg, "json: unknown field ") {
		return strings.TrimPrefix(msg, "json: ") + " (a typo, or a field of another event type?)"
	}
	return "invalid JSON value"
}

func jsonKind(goType string) string {
	switch strings.TrimPrefix(goType, "*") {
	case "string", "events.LinkState":
		return "a string"
	case "float64":
		return "a number"
	case "int64", "int32":
		return "an integer"
	case "bool":
		return "true or false"
	case "time.Time":
		return "an RFC 3339 timestamp string"
	}
	return goType
}

func joinTypes(ts []events.EventType) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

// recordKey picks the key: the literal key, the named field, or the first
// of loyaltyId, externalId, transactionId (the README's keying advice).
func recordKey(fields map[string]json.RawMessage, keyField, key string) ([]byte, error) {
	if key != "" {
		return []byte(key), nil
	}
	names := []string{"loyaltyId", "externalId", "transactionId"}
	if keyField != "" {
		names = []string{keyField}
	}
	for _, n := range names {
		raw, ok := fields[n]
		if !ok || string(raw) == "null" {
			continue
		}
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			if s == "" {
				continue
			}
			return []byte(s), nil
		}
		return bytes.TrimSpace(raw), nil // a number or boolean: its JSON text
	}
	return nil, fmt.Errorf("key: field %s is missing or empty", strings.Join(names, ", "))
}
