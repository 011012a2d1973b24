package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
)

func tailCommand() command {
	return command{
		summary: "decode records of any bridge topic to JSON lines on stdout",
		run:     runTail,
	}
}

// tailLine is one output line. Value is the decoded record; DecodeError
// replaces it for a record that does not decode.
type tailLine struct {
	Topic       string             `json:"topic"`
	Partition   int32              `json:"partition"`
	Offset      int64              `json:"offset"`
	Timestamp   time.Time          `json:"timestamp"`
	Key         string             `json:"key,omitempty"`
	Headers     map[string]string  `json:"headers,omitempty"`
	SchemaID    int                `json:"schemaId,omitempty"`
	Type        string             `json:"type,omitempty"`
	Value       any                `json:"value,omitempty"`
	DecodeError *codec.DecodeError `json:"decodeError,omitempty"`
	// Withheld says what was left out because it may hold personal data.
	Withheld string `json:"withheld,omitempty"`
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
	if *topic == "" {
		return &exitError{code: 2, err: errors.New("--topic is required")}
	}
	cd, err := cf.codec(ctx)
	if err != nil {
		return err
	}
	if _, ok := cd.SchemaID(*topic); !ok {
		return &exitError{code: 2, err: fmt.Errorf("--topic %s is not one of the bridge's topics", *topic)}
	}
	start := kgo.NewOffset().AtEnd()
	if *fromBeginning {
		start = kgo.NewOffset().AtStart()
	}
	kopts, err := cf.kafkaOpts()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(kopts,
		kgo.ConsumeTopics(*topic),
		kgo.ConsumeResetOffset(start),
		// A bridge in exactly-once mode writes in transactions: show what
		// committed, as downstream readers should see it.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)...)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	defer cl.Close()

	enc := json.NewEncoder(e.stdout)
	enc.SetEscapeHTML(false)
	n := 0
	for *maxRecords == 0 || n < *maxRecords {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil // interrupted: a normal end of tail
		}
		var ferr error
		fetches.EachError(func(t string, p int32, err error) {
			ferr = errors.Join(ferr, fmt.Errorf("fetch %s/%d: %w", t, p, err))
		})
		if ferr != nil {
			return ferr
		}
		for it := fetches.RecordIter(); !it.Done(); {
			r := it.Next()
			line, err := tailRecord(ctx, cd, r, *showPII)
			if err != nil {
				return err
			}
			var out any = line
			if *valuesOnly {
				if line.DecodeError != nil {
					fmt.Fprintf(e.stderr, "%s/%d/%d: %v\n", r.Topic, r.Partition, r.Offset, line.DecodeError)
					continue
				}
				if out, err = flatValue(line.Type, line.Value); err != nil {
					return err
				}
			}
			if err := enc.Encode(out); err != nil {
				return err
			}
			if n++; *maxRecords > 0 && n >= *maxRecords {
				break
			}
		}
	}
	return nil
}

func tailRecord(ctx context.Context, cd *codec.Codec, r *kgo.Record, showPII bool) (tailLine, error) {
	line := tailLine{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UTC(), Key: string(r.Key)}
	for _, h := range r.Headers {
		if line.Headers == nil {
			line.Headers = map[string]string{}
		}
		line.Headers[h.Key] = string(h.Value)
	}
	if len(r.Value) >= 5 && r.Value[0] == 0 {
		line.SchemaID = int(uint32(r.Value[1])<<24 | uint32(r.Value[2])<<16 | uint32(r.Value[3])<<8 | uint32(r.Value[4]))
	}
	v, err := cd.Decode(ctx, r.Topic, r.Value)
	var de *codec.DecodeError
	switch {
	case errors.As(err, &de):
		line.DecodeError = de
		return line, nil
	case err != nil:
		return line, err
	}
	switch v := v.(type) {
	case *events.MemberOnboardRequested:
		if !showPII {
			red := v.Redact()
			v = &red
		}
		line.Type, line.Value = string(v.Type()), v
	case events.Event:
		line.Type, line.Value = string(v.Type()), v
	case *events.LoyaltyResult:
		line.Type, line.Value = "LoyaltyResult", v
	case *events.LoyaltyError:
		// An original is an input record: an onboarding's personal data,
		// a description's free text. Base64 in JSON hides nothing.
		if n := len(v.OriginalKey) + len(v.OriginalValue); n > 0 && !showPII {
			c := *v
			c.OriginalKey, c.OriginalValue = nil, nil
			v = &c
			line.Withheld = fmt.Sprintf("originalKey and originalValue (%d bytes; --show-pii prints them)", n)
		}
		line.Type, line.Value = "LoyaltyError", v
	}
	return line, nil
}

// flatValue is the value's JSON object with "type" added: what produce reads.
func flatValue(typ string, v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["type"] = typ
	return m, nil
}
