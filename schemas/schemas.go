// Package schemas holds the Avro schemas of loyalty-bridge's topics, the
// contract with upstream producers and downstream consumers.
//
// The .avsc files in this directory are the source of truth: other teams read
// them, `loyalty-bridge schemas register` registers them, and internal/codec
// parses them at start-up. This package only embeds them; it must not grow
// logic. Evolve a schema compatibly (add fields with defaults, never rename or
// retype one) and run `loyalty-bridge schemas check` before deploying.
package schemas

import _ "embed"

//go:embed purchase.avsc
var purchase string

// Purchase returns the text of purchase.avsc, the value schema of the purchase topic: one PurchaseCompleted record.
func Purchase() string { return purchase }

//go:embed refund-redemption.avsc
var refundRedemption string

// RefundRedemption returns the text of refund-redemption.avsc, the value schema of the refund-redemption topic: the
// top-level union [RedemptionRequested, PurchaseRefunded].
func RefundRedemption() string { return refundRedemption }

//go:embed member-onboarding.avsc
var memberOnboarding string

// MemberOnboarding returns the text of member-onboarding.avsc, the value schema of the member-onboarding topic: the
// top-level union [MemberOnboardRequested, MemberLinkRequested, MemberUnlinkRequested].
func MemberOnboarding() string { return memberOnboarding }

//go:embed result.avsc
var result string

// Result returns the text of result.avsc, the value schema of every <input>.result topic: LoyaltyResult.
func Result() string { return result }

//go:embed error.avsc
var errorSchema string

// Error returns the text of error.avsc, the value schema of every <input>.error topic: LoyaltyError.
func Error() string { return errorSchema }

// Namespace is the Avro namespace of every named type in these schemas.
const Namespace = "com.loyaltybridge.events"
