package codec

import (
	"fmt"
	"strings"

	"github.com/hamba/avro/v2"

	"github.com/loyalty-bridge/loyalty-bridge/internal/events"
	"github.com/loyalty-bridge/loyalty-bridge/schemas"
)

// contract is the bridge's side of one kind of topic: the schema it
// registers and writes with, and the reader records it decodes into.
type contract struct {
	name     string // purchase, refund-redemption, member-onboarding, result, error
	text     string
	schema   avro.Schema
	union    bool
	branches []*branch
}

// branch is one record of a contract (the whole schema, or one union branch).
type branch struct {
	index    int // union index when the contract is a union
	fullName string
	aliases  map[string]bool // full names of the record's aliases
	schema   *avro.RecordSchema
	newValue func() any
}

// contracts are the five schemas of package schemas, parsed.
type contracts struct {
	purchase, refundRedemption, memberOnboarding, result, error *contract
	// inputNames holds the full names of every input event record, to tell
	// a record on the wrong topic from an unknown one.
	inputNames map[string]bool
}

func parseContracts() (*contracts, error) {
	mk := func(name, text string, newValue func(fullName string) func() any) (*contract, error) {
		// A cache per file: each .avsc stands alone (the enums in result and
		// error are defined twice on purpose), and the global cache would
		// let one file's definition leak into another's.
		s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
		if err != nil {
			return nil, fmt.Errorf("codec: schema %s: %w", name, err)
		}
		c := &contract{name: name, text: text, schema: s}
		records := []avro.Schema{s}
		if u, ok := s.(*avro.UnionSchema); ok {
			c.union, records = true, u.Types()
		}
		for i, r := range records {
			rec, ok := r.(*avro.RecordSchema)
			if !ok {
				return nil, fmt.Errorf("codec: schema %s: branch %d is not a record", name, i)
			}
			nv := newValue(rec.FullName())
			if nv == nil {
				return nil, fmt.Errorf("codec: schema %s: no Go type for %s", name, rec.FullName())
			}
			b := &branch{index: i, fullName: rec.FullName(), aliases: map[string]bool{}, schema: rec, newValue: nv}
			for _, a := range rec.Aliases() {
				b.aliases[a] = true
			}
			c.branches = append(c.branches, b)
		}
		return c, nil
	}
	input := func(fullName string) func() any {
		name, ok := strings.CutPrefix(fullName, schemas.Namespace+".")
		t := events.EventType(name)
		if !ok || events.New(t) == nil {
			return nil
		}
		return func() any { return events.New(t) }
	}
	var cs contracts
	var err error
	if cs.purchase, err = mk("purchase", schemas.Purchase(), input); err != nil {
		return nil, err
	}
	if cs.refundRedemption, err = mk("refund-redemption", schemas.RefundRedemption(), input); err != nil {
		return nil, err
	}
	if cs.memberOnboarding, err = mk("member-onboarding", schemas.MemberOnboarding(), input); err != nil {
		return nil, err
	}
	if cs.result, err = mk("result", schemas.Result(), func(string) func() any {
		return func() any { return new(events.LoyaltyResult) }
	}); err != nil {
		return nil, err
	}
	if cs.error, err = mk("error", schemas.Error(), func(string) func() any {
		return func() any { return new(events.LoyaltyError) }
	}); err != nil {
		return nil, err
	}
	cs.inputNames = map[string]bool{}
	for _, c := range []*contract{cs.purchase, cs.refundRedemption, cs.memberOnboarding} {
		for _, b := range c.branches {
			cs.inputNames[b.fullName] = true
		}
	}
	return &cs, nil
}

// match finds the reader branch for a writer record name: by full name,
// else by one of the reader record's aliases.
func (c *contract) match(fullName string) *branch {
	for _, b := range c.branches {
		if b.fullName == fullName {
			return b
		}
	}
	for _, b := range c.branches {
		if b.aliases[fullName] {
			return b
		}
	}
	return nil
}

// byType finds the branch of an input event type.
func (c *contract) byType(t events.EventType) *branch {
	return c.match(schemas.Namespace + "." + string(t))
}
