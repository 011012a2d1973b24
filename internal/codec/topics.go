package codec

// Default input topic names.
const (
	DefaultPurchaseTopic         = "loyalty.purchase"
	DefaultRefundRedemptionTopic = "loyalty.refund-redemption"
	DefaultMemberOnboardingTopic = "loyalty.member-onboarding"
)

// Topics names the three input topics. An empty field means its default
// (DefaultPurchaseTopic …), so the zero value is the default configuration.
type Topics struct {
	Purchase         string
	RefundRedemption string
	MemberOnboarding string
}

// DefaultTopics returns the default topic names.
func DefaultTopics() Topics { return Topics{}.WithDefaults() }

// WithDefaults returns t with every empty name set to its default.
func (t Topics) WithDefaults() Topics {
	if t.Purchase == "" {
		t.Purchase = DefaultPurchaseTopic
	}
	if t.RefundRedemption == "" {
		t.RefundRedemption = DefaultRefundRedemptionTopic
	}
	if t.MemberOnboarding == "" {
		t.MemberOnboarding = DefaultMemberOnboardingTopic
	}
	return t
}

// Inputs returns the three input topics (defaults applied).
func (t Topics) Inputs() []string {
	t = t.WithDefaults()
	return []string{t.Purchase, t.RefundRedemption, t.MemberOnboarding}
}

// ResultTopic is the reply topic for results of input topic in: "<in>.result".
func (Topics) ResultTopic(in string) string { return in + ".result" }

// ErrorTopic is the reply topic for errors of input topic in: "<in>.error".
func (Topics) ErrorTopic(in string) string { return in + ".error" }

// All returns every topic the bridge reads or writes: each input topic
// followed by its result and error topics.
func (t Topics) All() []string {
	var all []string
	for _, in := range t.Inputs() {
		all = append(all, in, t.ResultTopic(in), t.ErrorTopic(in))
	}
	return all
}

// Subject is the TopicNameStrategy subject of a topic's record values.
func Subject(topic string) string { return topic + "-value" }
