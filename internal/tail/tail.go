package tail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
)

// Line is one output line. Value is the decoded record; DecodeError
// replaces it for a record that does not decode.
type Line struct {
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

// ClientOpts are the consumer options of a tail of topic, to add to the
// connection's: no group, from the start or only new records, and only
// what committed.
func ClientOpts(topic string, fromBeginning bool) []kgo.Opt {
	start := kgo.NewOffset().AtEnd()
	if fromBeginning {
		start = kgo.NewOffset().AtStart()
	}
	return []kgo.Opt{
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(start),
		// A bridge in exactly-once mode writes in transactions: show what
		// committed, as downstream readers should see it.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	}
}

// Options shape a Run.
type Options struct {
	Codec *codec.Codec // decodes the records (required)
	Max   int          // stop after this many records; 0: until ctx ends
	// ShowPII prints onboardings' personal data and error events'
	// originals.
	ShowPII bool
	// ValuesOnly writes {"type":…, <fields>} per record, the input of
	// package produce; a record that does not decode is skipped and told
	// to OnSkip (nil: dropped).
	ValuesOnly bool
	OnSkip     func(error)
}

// Run polls cl and writes one JSON line per record to w until o.Max
// records are written or ctx ends (a normal end: it returns nil). A fetch
// error, a codec failure other than a *codec.DecodeError and a write error
// end it.
func Run(ctx context.Context, cl *kgo.Client, w io.Writer, o Options) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	n := 0
	for o.Max == 0 || n < o.Max {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
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
			line, err := Decode(ctx, o.Codec, r, o.ShowPII)
			if err != nil {
				return err
			}
			var out any = line
			if o.ValuesOnly {
				if line.DecodeError != nil {
					if o.OnSkip != nil {
						o.OnSkip(fmt.Errorf("%s/%d/%d: %w", r.Topic, r.Partition, r.Offset, line.DecodeError))
					}
					continue
				}
				if out, err = flatValue(line.Type, line.Value); err != nil {
					return err
				}
			}
			if err := enc.Encode(out); err != nil {
				return err
			}
			if n++; o.Max > 0 && n >= o.Max {
				break
			}
		}
	}
	return nil
}

// Decode turns r into a Line, personal data withheld unless showPII. A
// record that does not decode is a Line with DecodeError set; the error is
// for failures that say nothing of the record (registry unreachable, ctx
// ended).
func Decode(ctx context.Context, cd *codec.Codec, r *kgo.Record, showPII bool) (Line, error) {
	line := Line{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UTC(), Key: string(r.Key)}
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
		return line, fmt.Errorf("decode %s/%d/%d: %w", r.Topic, r.Partition, r.Offset, err)
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
