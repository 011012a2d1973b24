package codec

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
	"golang.org/x/sync/singleflight"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/schemas"
)

// Options configure New. Registry is required; the zero value of every other
// field is a sensible default.
type Options struct {
	// Registry is the Schema Registry client, shared and safe for concurrent use.
	Registry *sr.Client
	// Topics names the input topics; the result and error topics derive
	// from them. Zero value: the default names.
	Topics Topics
	// Register makes New register the bridge's schemas under each topic's
	// subject (a no-op when already registered; fails when the registry
	// finds them incompatible). When false, New only looks them up and
	// fails if one is missing: run `loyalty-bridge schemas register` first.
	Register bool
	// FetchTimeout bounds one registry request for an unseen writer schema
	// id. Default 10s.
	FetchTimeout time.Duration
	// MaxWriterSchemas bounds the writer schemas (and unknown ids) kept in
	// memory. A topic sees a handful of writer ids in its life; the bound
	// protects against a flood of random ids. Default 1024; past it, ids
	// are still decoded but unknown ids are no longer remembered.
	MaxWriterSchemas int
	// MaxValueBytes bounds a record value Decode accepts; a larger one is
	// a *DecodeError of kind TOO_LARGE, decoded no further, so one hostile
	// record cannot make the bridge allocate without bound. Default 1 MiB
	// (Kafka's default max.message.bytes); an event is a few hundred bytes.
	MaxValueBytes int
}

// Codec encodes and decodes the values of the bridge's topics. It is safe
// for concurrent use; build one with New and share it.
type Codec struct {
	reg          *sr.Client
	api          avro.API
	cs           *contracts
	topics       map[string]*topic
	fetchTimeout time.Duration
	maxWriters   int
	maxValue     int

	mu      sync.RWMutex
	writers map[int]avro.Schema // writer schemas by id
	unknown map[int]bool        // ids the registry answered "not found" for
	plans   map[planKey]*plan
	fetch   singleflight.Group

	readers sync.Pool // *avro.Reader
	writerP sync.Pool // *avro.Writer
}

// topic is one configured topic: its contract and the id of the bridge's
// schema under the topic's subject.
type topic struct {
	name     string
	contract *contract
	id       int
	header   [5]byte // magic byte and id, ready to prepend
}

// New parses the embedded schemas, registers or looks them up for every
// topic of o.Topics (inputs, results, errors) and returns a ready Codec.
// It is the only place the codec calls the registry except to fetch writer
// schemas of ids it has not seen.
func New(ctx context.Context, o Options) (*Codec, error) {
	if o.Registry == nil {
		return nil, errors.New("codec: Options.Registry is required")
	}
	if o.FetchTimeout <= 0 {
		o.FetchTimeout = 10 * time.Second
	}
	if o.MaxWriterSchemas <= 0 {
		o.MaxWriterSchemas = 1024
	}
	if o.MaxValueBytes <= 0 {
		o.MaxValueBytes = 1 << 20
	}
	seen := map[string]bool{}
	for _, t := range o.Topics.All() {
		if seen[t] {
			return nil, fmt.Errorf("codec: topic %s configured twice", t)
		}
		seen[t] = true
	}
	cs, err := parseContractsOnce()
	if err != nil {
		return nil, err
	}
	api := avro.Config{TagKey: "avro", MaxByteSliceSize: 1 << 20}.Freeze()
	c := &Codec{
		reg: o.Registry, api: api, cs: cs,
		topics:       map[string]*topic{},
		fetchTimeout: o.FetchTimeout, maxWriters: o.MaxWriterSchemas, maxValue: o.MaxValueBytes,
		writers: map[int]avro.Schema{}, unknown: map[int]bool{}, plans: map[planKey]*plan{},
	}
	c.readers.New = func() any { return avro.NewReader(nil, 0, avro.WithReaderConfig(api)) }
	c.writerP.New = func() any { return avro.NewWriter(nil, 512, avro.WithWriterConfig(api)) }

	for _, st := range SubjectsOf(o.Topics) {
		ct := cs.byName(st.Contract)
		s := sr.Schema{Schema: ct.text, Type: sr.TypeAvro}
		// RegisterSchema, not CreateSchema: that asks again for every
		// subject and version holding the id, one request each.
		var id int
		if o.Register {
			id, err = o.Registry.RegisterSchema(ctx, st.Subject, s, -1, -1)
		} else {
			var ss sr.SubjectSchema
			ss, err = o.Registry.LookupSchema(ctx, st.Subject, s)
			id = ss.ID
		}
		if err != nil {
			var re *sr.ResponseError
			if !o.Register && errors.As(err, &re) && sr.IsNotFoundError(re.ErrorCode) {
				return nil, fmt.Errorf("codec: subject %s does not hold the bridge's %s schema (run `loyalty-bridge schemas register`): %w", st.Subject, st.Contract, err)
			}
			if r := refused(err); r != nil {
				return nil, fmt.Errorf("codec: %s schema for subject %s: %w", st.Contract, st.Subject, r)
			}
			return nil, fmt.Errorf("codec: %s schema for subject %s: %w: %w", st.Contract, st.Subject, ErrRegistry, err)
		}
		t := &topic{name: st.Topic, contract: ct, id: id}
		t.header[0] = 0
		binary.BigEndian.PutUint32(t.header[1:], uint32(id))
		c.topics[st.Topic] = t
		// The bridge wrote this schema: no need to fetch it back to read
		// records written with it.
		c.writers[id] = ct.schema
	}
	return c, nil
}

// SubjectTopic is one registry subject the bridge owns.
type SubjectTopic struct {
	Topic    string
	Subject  string
	Contract string // purchase, refund-redemption, member-onboarding, result or error
	Schema   string // the schema text
}

// SubjectsOf lists the subjects of every topic of t, with the schema the
// bridge registers under each.
func SubjectsOf(t Topics) []SubjectTopic {
	t = t.WithDefaults()
	in := []struct{ topic, contract string }{
		{t.Purchase, "purchase"}, {t.RefundRedemption, "refund-redemption"}, {t.MemberOnboarding, "member-onboarding"},
	}
	var out []SubjectTopic
	for _, i := range in {
		out = append(out,
			SubjectTopic{Topic: i.topic, Subject: Subject(i.topic), Contract: i.contract},
			SubjectTopic{Topic: t.ResultTopic(i.topic), Subject: Subject(t.ResultTopic(i.topic)), Contract: "result"},
			SubjectTopic{Topic: t.ErrorTopic(i.topic), Subject: Subject(t.ErrorTopic(i.topic)), Contract: "error"},
		)
	}
	for k := range out {
		out[k].Schema = schemaText(out[k].Contract)
	}
	return out
}

func (cs *contracts) byName(name string) *contract {
	switch name {
	case "purchase":
		return cs.purchase
	case "refund-redemption":
		return cs.refundRedemption
	case "member-onboarding":
		return cs.memberOnboarding
	case "result":
		return cs.result
	case "error":
		return cs.error
	}
	return nil
}

// SchemaID returns the id of the bridge's schema for topic (what Encode
// writes), and whether topic is configured.
func (c *Codec) SchemaID(topic string) (int, bool) {
	t, ok := c.topics[topic]
	if !ok {
		return 0, false
	}
	return t.id, true
}

// EventTypes returns the event types input topic carries, in union order,
// or nil when topic is not a configured input topic.
func (c *Codec) EventTypes(topic string) []events.EventType {
	t, ok := c.topics[topic]
	if !ok || t.contract == c.cs.result || t.contract == c.cs.error {
		return nil
	}
	out := make([]events.EventType, len(t.contract.branches))
	for i, b := range t.contract.branches {
		out[i] = events.EventType(strings.TrimPrefix(b.fullName, schemas.Namespace+"."))
	}
	return out
}

// ---- encoding ----

// Encode encodes an input event for input topic. The event's type must be
// one of the topic's contract (a PurchaseCompleted only on the purchase
// topic). It does not validate the event.
func (c *Codec) Encode(topic string, ev events.Event) ([]byte, error) {
	t, err := c.topic(topic)
	if err != nil {
		return nil, err
	}
	if ev == nil {
		return nil, fmt.Errorf("codec: encode %s: nil event", topic)
	}
	b := t.contract.byType(ev.Type())
	if b == nil {
		return nil, fmt.Errorf("codec: encode %s: %s is not an event of this topic", topic, ev.Type())
	}
	return c.encode(t, b, ev)
}

// EncodeResult encodes r for result topic (an <input>.result topic).
func (c *Codec) EncodeResult(topic string, r *events.LoyaltyResult) ([]byte, error) {
	return c.encodeSingle(topic, c.cs.result, r, r == nil)
}

// EncodeError encodes e for error topic (an <input>.error topic).
func (c *Codec) EncodeError(topic string, e *events.LoyaltyError) ([]byte, error) {
	return c.encodeSingle(topic, c.cs.error, e, e == nil)
}

func (c *Codec) encodeSingle(topic string, want *contract, v any, isNil bool) ([]byte, error) {
	t, err := c.topic(topic)
	if err != nil {
		return nil, err
	}
	if t.contract != want {
		return nil, fmt.Errorf("codec: encode %s: not a %s topic", topic, want.name)
	}
	if isNil {
		return nil, fmt.Errorf("codec: encode %s: nil %s", topic, want.name)
	}
	return c.encode(t, want.branches[0], v)
}

func (c *Codec) encode(t *topic, b *branch, v any) (out []byte, err error) {
	w := c.writerP.Get().(*avro.Writer)
	defer c.writerP.Put(w)
	w.Reset(nil)
	w.Error = nil
	_, _ = w.Write(t.header[:])
	if t.contract.union {
		w.WriteLong(int64(b.index))
	}
	w.WriteVal(b.schema, v)
	if w.Error != nil {
		return nil, fmt.Errorf("codec: encode %s %s: %w", t.name, b.fullName, w.Error)
	}
	return append([]byte(nil), w.Buffer()...), nil
}

func (c *Codec) topic(name string) (*topic, error) {
	t, ok := c.topics[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, name)
	}
	return t, nil
}

// ---- decoding ----

type planKey struct {
	id       int
	contract *contract
}

// plan is how to read records written with one writer schema into one
// contract: one step per writer branch (one when the writer is a record).
type plan struct {
	union bool
	steps []step
	// scan: the writer has arrays or maps, whose block counts are checked
	// against the value's size before hamba/avro reads it (scanBounded).
	scan   bool
	writer avro.Schema
}

type step struct {
	branch   *branch     // reader branch; nil when err is set
	resolved avro.Schema // writer resolved into the reader branch
	err      *DecodeError
}

// Decode decodes a record value read from topic. Input topics give an
// events.Event (*events.PurchaseCompleted …), result topics a
// *events.LoyaltyResult, error topics a *events.LoyaltyError. It returns a
// *DecodeError for a value that can never be decoded, and another error
// (ErrRegistry, ErrUnknownTopic, ctx's error) otherwise. The decoded value
// does not alias value.
func (c *Codec) Decode(ctx context.Context, topic string, value []byte) (any, error) {
	t, err := c.topic(topic)
	if err != nil {
		return nil, err
	}
	derr := func(kind DecodeKind, id int, format string, args ...any) error {
		return &DecodeError{Kind: kind, Topic: topic, SchemaID: id, Detail: fmt.Sprintf(format, args...)}
	}
	switch {
	case len(value) == 0:
		return nil, derr(KindEmpty, 0, "empty value")
	case len(value) > c.maxValue:
		return nil, derr(KindTooLarge, 0, "%d bytes, more than the %d accepted", len(value), c.maxValue)
	case value[0] != 0:
		return nil, derr(KindWrongMagic, 0, "first byte is 0x%02x, not the Confluent magic byte 0x00", value[0])
	case len(value) < 5:
		return nil, derr(KindTruncated, 0, "%d bytes, shorter than the 5-byte header", len(value))
	}
	id := int(binary.BigEndian.Uint32(value[1:5]))
	body := value[5:]
	if len(body) == 0 {
		return nil, derr(KindEmpty, id, "header without a body")
	}
	p, err := c.plan(ctx, id, t.contract)
	if err != nil {
		var de *DecodeError
		if errors.As(err, &de) {
			de.Topic = topic
		}
		return nil, err
	}
	return c.read(topic, id, p, body)
}

// DecodeEvent is Decode for an input topic.
func (c *Codec) DecodeEvent(ctx context.Context, topic string, value []byte) (events.Event, error) {
	v, err := c.Decode(ctx, topic, value)
	if err != nil {
		return nil, err
	}
	ev, ok := v.(events.Event)
	if !ok {
		return nil, fmt.Errorf("codec: %s is not an input topic", topic)
	}
	return ev, nil
}

func (c *Codec) read(topic string, id int, p *plan, body []byte) (v any, err error) {
	r := c.readers.Get().(*avro.Reader)
	r.Reset(body)
	r.Error = nil
	defer func() {
		// hamba/avro is meant to report, not panic, on bad input; this is
		// the net in case a hostile record finds a path that does.
		if rec := recover(); rec != nil {
			v, err = nil, &DecodeError{Kind: KindMalformed, Topic: topic, SchemaID: id, Detail: fmt.Sprintf("decoder panic: %v", rec)}
			return // the reader's state is unknown: do not pool it
		}
		r.Reset(nil)
		c.readers.Put(r)
	}()
	derr := func(kind DecodeKind, format string, args ...any) error {
		return &DecodeError{Kind: kind, Topic: topic, SchemaID: id, Detail: fmt.Sprintf(format, args...)}
	}
	if p.scan {
		if err := scanBounded(p.writer, body); err != nil {
			return nil, derr(KindMalformed, "%v", err)
		}
	}
	idx := 0
	if p.union {
		l := r.ReadLong()
		if r.Error != nil {
			return nil, derr(KindTruncated, "no union index")
		}
		if l < 0 || l >= int64(len(p.steps)) {
			return nil, derr(KindUnknownBranch, "union index %d out of range [0,%d)", l, len(p.steps))
		}
		idx = int(l)
	}
	s := p.steps[idx]
	if s.err != nil {
		e := *s.err
		e.Topic = topic
		return nil, &e
	}
	v = s.branch.newValue()
	r.ReadVal(s.resolved, v)
	switch {
	case r.Error == nil:
	case errors.Is(r.Error, io.EOF) || errors.Is(r.Error, io.ErrUnexpectedEOF):
		return nil, derr(KindTruncated, "body ends inside %s", s.branch.fullName)
	default:
		return nil, derr(KindMalformed, "%s: %v", s.branch.fullName, r.Error)
	}
	if r.Peek(); r.Error == nil {
		return nil, derr(KindTrailingBytes, "bytes left after %s", s.branch.fullName)
	}
	if e, ok := v.(*events.LoyaltyError); ok {
		// hamba/avro carves small byte slices out of a shared slab with
		// spare capacity: an append by the caller would overwrite the
		// bytes of other decoded values. Clip them.
		e.OriginalKey, e.OriginalValue = slices.Clip(e.OriginalKey), slices.Clip(e.OriginalValue)
	}
	return v, nil
}

// plan returns the cached plan for (id, ct), building it on first use.
func (c *Codec) plan(ctx context.Context, id int, ct *contract) (*plan, error) {
	key := planKey{id, ct}
	c.mu.RLock()
	p := c.plans[key]
	c.mu.RUnlock()
	if p != nil {
		return p, nil
	}
	w, err := c.writer(ctx, id)
	if err != nil {
		return nil, err
	}
	p = c.buildPlan(id, w, ct)
	c.mu.Lock()
	if len(c.plans) < c.maxWriters*5 { // five contracts per writer at most
		c.plans[key] = p
	}
	c.mu.Unlock()
	return p, nil
}

// writer returns the parsed writer schema of id, fetching it once.
func (c *Codec) writer(ctx context.Context, id int) (avro.Schema, error) {
	c.mu.RLock()
	w, unknown := c.writers[id], c.unknown[id]
	c.mu.RUnlock()
	if w != nil {
		return w, nil
	}
	if unknown {
		return nil, &DecodeError{Kind: KindUnknownSchemaID, SchemaID: id, Detail: "the registry does not know this id"}
	}
	ch := c.fetch.DoChan(strconv.Itoa(id), func() (any, error) {
		// Detached from the first caller's context so that its cancellation
		// does not fail the other callers waiting on the same fetch.
		// A caller that missed the cache just before an earlier fetch of
		// the same id stored its result, and joined after that fetch
		// ended, finds it here instead of fetching again.
		c.mu.RLock()
		w := c.writers[id]
		c.mu.RUnlock()
		if w != nil {
			return w, nil
		}
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.fetchTimeout)
		defer cancel()
		return c.fetchWriter(fctx, id)
	})
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Val.(avro.Schema), nil
	}
}

func (c *Codec) fetchWriter(ctx context.Context, id int) (avro.Schema, error) {
	s, err := c.reg.SchemaByID(ctx, id)
	if err != nil {
		var re *sr.ResponseError
		if errors.As(err, &re) && sr.IsNotFoundError(re.ErrorCode) {
			c.mu.Lock()
			if len(c.unknown) < c.maxWriters {
				c.unknown[id] = true
			}
			c.mu.Unlock()
			return nil, &DecodeError{Kind: KindUnknownSchemaID, SchemaID: id, Detail: "the registry does not know this id"}
		}
		return nil, fmt.Errorf("codec: %w: fetch schema id %d: %w", ErrRegistry, id, err)
	}
	var w avro.Schema
	switch {
	case s.Type != sr.TypeAvro:
		err = fmt.Errorf("schema type %s, not Avro", s.Type)
	case len(s.References) > 0:
		err = errors.New("schema references are not supported")
	default:
		if w, err = avro.ParseWithCache(s.Schema, "", &avro.SchemaCache{}); err == nil {
			err = checkBounded(w)
		}
	}
	if err != nil {
		// A schema the bridge cannot use is permanent for this id: remember
		// it as a writer whose every branch fails.
		w = unusable{err: err}
	}
	c.mu.Lock()
	if len(c.writers) < c.maxWriters {
		c.writers[id] = w
	}
	c.mu.Unlock()
	return w, nil
}

// unusable stands for a writer schema the registry returned but the bridge
// cannot parse or use.
type unusable struct {
	avro.Schema
	err error
}

func (c *Codec) buildPlan(id int, w avro.Schema, ct *contract) *plan {
	fail := func(kind DecodeKind, format string, args ...any) step {
		return step{err: &DecodeError{Kind: kind, SchemaID: id, Detail: fmt.Sprintf(format, args...)}}
	}
	if u, ok := w.(unusable); ok {
		return &plan{steps: []step{fail(KindIncompatible, "writer schema: %v", u.err)}}
	}
	p := &plan{scan: hasBlocks(w), writer: w}
	branches := []avro.Schema{w}
	if u, ok := w.(*avro.UnionSchema); ok {
		p.union, branches = true, u.Types()
	}
	compat := avro.NewSchemaCompatibility()
	for _, wb := range branches {
		named, ok := wb.(avro.NamedSchema)
		if !ok || wb.Type() != avro.Record {
			p.steps = append(p.steps, fail(KindUnknownBranch, "writer %s is not a record of the %s contract", wb.Type(), ct.name))
			continue
		}
		rb := ct.match(named.FullName())
		if rb == nil {
			kind := KindUnknownBranch
			if c.cs.inputNames[named.FullName()] {
				kind = KindWrongTopic
			}
			p.steps = append(p.steps, fail(kind, "%s is not an event of the %s contract", named.FullName(), ct.name))
			continue
		}
		resolved, err := compat.Resolve(rb.schema, wb)
		if err != nil {
			p.steps = append(p.steps, fail(KindIncompatible, "writer %s cannot be read as ours: %v", named.FullName(), err))
			continue
		}
		p.steps = append(p.steps, step{branch: rb, resolved: resolved})
	}
	return p
}

func schemaText(contract string) string {
	switch contract {
	case "purchase":
		return schemas.Purchase()
	case "refund-redemption":
		return schemas.RefundRedemption()
	case "member-onboarding":
		return schemas.MemberOnboarding()
	case "result":
		return schemas.Result()
	case "error":
		return schemas.Error()
	}
	return ""
}

// parseContractsOnce parses the embedded schemas once per process: they are
// immutable, and every Codec may share them.
var parseContractsOnce = sync.OnceValues(parseContracts)
