package hostile

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
)

// Expected answers: a result, or an error event of a category.
const (
	Result     = "result"
	Validation = "error " + string(events.CategoryValidation)
	Decode     = "error " + string(events.CategoryDecode)
)

// Case is one hostile record of the purchase topic and the answer the
// bridge must give it.
type Case struct {
	Name string
	// ID is the transactionId its output is keyed by: the purchase's, or
	// "" for a record that does not decode (keyed by its source position).
	ID     string
	Record *kgo.Record
	Want   string // Result, Validation or Decode
}

// Options says what the cases are made of.
type Options struct {
	// Topic is the purchase topic.
	Topic string
	// Encode encodes a purchase for Topic (codec.Codec.Encode).
	Encode func(topic string, ev events.Event) ([]byte, error)
	// Member is a loyaltyId the partner knows: valid purchases accrue to it.
	Member string
	// Prefix starts every transactionId, so that runs do not collide.
	Prefix string
	// MaxValueBytes is the largest value the codec decodes (codec's
	// default, 1 MiB, when 0).
	MaxValueBytes int
}

// Cases returns the hostile records. Each fits Kafka's default message limit
// (1,048,588 bytes) with its headers, except the two values at and past
// MaxValueBytes: their topic needs a larger max.message.bytes.
func Cases(o Options) ([]Case, error) {
	if o.MaxValueBytes == 0 {
		o.MaxValueBytes = 1 << 20
	}
	rng := rand.New(rand.NewPCG(7, 26))
	purchase := func(id string, amount float64) *events.PurchaseCompleted {
		return &events.PurchaseCompleted{TransactionID: o.Prefix + id, LoyaltyID: o.Member, TransactionDate: time.Now(), Amount: amount, Currency: "VND"}
	}
	flood := func(n int, keys ...string) []kgo.RecordHeader {
		h := make([]kgo.RecordHeader, n)
		for i := range h {
			h[i] = kgo.RecordHeader{Key: keys[i%len(keys)]}
		}
		return h
	}
	atLimit := []kgo.RecordHeader{
		{Key: "correlation-id", Value: []byte(strings.Repeat("c", 128))},
		{Key: "traceparent", Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")},
	}
	for i := range 7_000 {
		atLimit = append(atLimit, kgo.RecordHeader{Key: fmt.Sprintf("x-unknown-%d", i), Value: noise(rng, 100)})
	}
	deep := strings.Repeat(`{"a":`, events.MaxJSONDepth+1) + "1" + strings.Repeat("}", events.MaxJSONDepth+1)
	long := func(n int) *string { s := `{"a":"` + strings.Repeat("y", n) + `"}`; return &s }

	type spec struct {
		name    string
		ev      *events.PurchaseCompleted
		value   []byte // instead of ev's encoding
		fill    bool   // ev with a description making the value MaxValueBytes
		key     []byte
		headers []kgo.RecordHeader
		want    string
	}
	specs := []spec{
		{name: "40,000 empty correlation-ids, invalid", ev: purchase("flood-invalid", -1), headers: flood(40_000, "correlation-id"), want: Validation},
		{name: "40,000 repeated headers, valid", ev: purchase("flood-valid", 1000), headers: flood(40_000, "traceparent", "correlation-id"), want: Result},
		{name: "900 KB key, valid", ev: purchase("key-valid", 1000), key: noise(rng, 900_000), want: Result},
		{name: "900 KB key, invalid", ev: purchase("key-invalid", -1), key: noise(rng, 900_000), want: Validation},
		{name: "every header at its limit", ev: purchase("headers-at-limit", -1), headers: atLimit, want: Validation},
		{name: "JSON nested past the limit", ev: func() *events.PurchaseCompleted { p := purchase("deep", 1000); p.ExtraData = &deep; return p }(), want: Validation},
		{name: "description at the limit", ev: func() *events.PurchaseCompleted {
			p := purchase("desc-at-limit", 1000)
			p.Description = long(events.MaxJSONLen - 8)
			return p
		}(), want: Result},
		{name: "value at the decode limit", ev: purchase("value-at-limit", 1000), fill: true, want: Validation},
		{name: "value over the decode limit", value: noise(rng, o.MaxValueBytes+1), want: Decode},
		{name: "no Avro after a schema id", value: append([]byte{0, 0, 0, 0, 1}, noise(rng, 500_000)...), want: Decode},
	}
	cases := make([]Case, 0, len(specs))
	for _, s := range specs {
		c := Case{Name: s.name, Want: s.want, Record: &kgo.Record{Topic: o.Topic, Key: s.key, Headers: s.headers}}
		if c.Record.Key == nil {
			c.Record.Key = []byte("hostile")
		}
		switch {
		case s.value != nil:
			c.Record.Value = s.value
		case s.fill:
			v, err := fillTo(o, s.ev, o.MaxValueBytes)
			if err != nil {
				return nil, err
			}
			c.ID, c.Record.Value = s.ev.TransactionID, v
		default:
			v, err := o.Encode(o.Topic, s.ev)
			if err != nil {
				return nil, fmt.Errorf("hostile %s: %w", s.name, err)
			}
			c.ID, c.Record.Value = s.ev.TransactionID, v
		}
		cases = append(cases, c)
	}
	return cases, nil
}

// fillTo encodes ev with a description that makes the value exactly n
// bytes (an over-long description: a VALIDATION error, after a full decode).
func fillTo(o Options, ev *events.PurchaseCompleted, n int) ([]byte, error) {
	v, err := o.Encode(o.Topic, ev)
	if err != nil {
		return nil, fmt.Errorf("hostile value at the limit: %w", err)
	}
	// The description's length prefix grows with it: find the filler by
	// trying the few lengths around the first guess.
	for fill := n - len(v) - 32; fill < n; fill++ {
		s := `{"a":"` + strings.Repeat("y", fill) + `"}`
		ev.Description = &s
		if v, err = o.Encode(o.Topic, ev); err != nil {
			return nil, fmt.Errorf("hostile value at the limit: %w", err)
		}
		if len(v) >= n {
			break
		}
	}
	if len(v) != n {
		return nil, fmt.Errorf("hostile value at the limit: %d bytes, not %d", len(v), n)
	}
	return v, nil
}

// noise is n bytes that do not compress, as a broker measures batches after
// compression.
func noise(rng *rand.Rand, n int) []byte {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return b
}
