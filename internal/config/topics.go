package config

import (
	"errors"
	"fmt"

	"github.com/loyalty-bridge/loyalty-bridge/internal/codec"
	"github.com/loyalty-bridge/loyalty-bridge/internal/flagenv"
)

// Topics names the input topics; the reply topics are theirs with
// ".result" and ".error" appended.
type Topics struct {
	Purchase         string
	RefundRedemption string
	MemberOnboarding string
}

// Define defines the section's flags on b's flag set and binds them.
func (t *Topics) Define(b *flagenv.Binder) {
	fs := b.FlagSet()
	d := codec.DefaultTopics()
	fs.StringVar(&t.Purchase, "purchase-topic", d.Purchase, "input topic of PurchaseCompleted")
	fs.StringVar(&t.RefundRedemption, "refund-redemption-topic", d.RefundRedemption, "input topic of RedemptionRequested and PurchaseRefunded")
	fs.StringVar(&t.MemberOnboarding, "member-onboarding-topic", d.MemberOnboarding, "input topic of member commands")
}

// Build is the codec's topic set.
func (t *Topics) Build() codec.Topics {
	return codec.Topics{Purchase: t.Purchase, RefundRedemption: t.RefundRedemption, MemberOnboarding: t.MemberOnboarding}
}

// Validate applies Kafka's naming rules, leaving room for the reply
// suffixes, and refuses one topic named twice.
func (t *Topics) Validate() error {
	var errs []error
	seen := map[string]string{}
	for _, f := range []struct{ flag, name string }{{"purchase-topic", t.Purchase},
		{"refund-redemption-topic", t.RefundRedemption}, {"member-onboarding-topic", t.MemberOnboarding}} {
		if err := checkTopicName(f.name); err != nil {
			errs = append(errs, fmt.Errorf("--%s: %v", f.flag, err))
		} else if other, dup := seen[f.name]; dup {
			errs = append(errs, fmt.Errorf("--%s: %q is also --%s", f.flag, f.name, other))
		}
		seen[f.name] = f.flag
	}
	return errors.Join(errs...)
}

// Group is the consumer group of the bridge.
type Group struct {
	Name string
}

// Define defines --group on b's flag set and binds it.
func (g *Group) Define(b *flagenv.Binder) {
	b.FlagSet().StringVar(&g.Name, "group", "loyalty-bridge", "consumer group")
}

// Validate checks that a group is named.
func (g *Group) Validate() error {
	if g.Name == "" {
		return errors.New("--group: required")
	}
	return nil
}

// checkTopicName applies Kafka's rules to an input topic name, leaving room
// for the ".result" and ".error" suffixes.
func checkTopicName(name string) error {
	const maxLen = 249 - len(".result")
	switch {
	case name == "":
		return errors.New("required")
	case name == "." || name == "..":
		return fmt.Errorf("%q is not a legal topic name", name)
	case len(name) > maxLen:
		return fmt.Errorf("longer than %d characters", maxLen)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("%q: only letters, digits, '.', '_' and '-' are allowed", name)
		}
	}
	return nil
}
