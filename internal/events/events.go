package events

import (
	"cmp"
	"strconv"
	"time"
)

// EventType names an input event: its Avro record name, and the value of the
// event-type header on reply records.
type EventType string

// The input event types, one per Avro record of the input topics.
const (
	TypePurchaseCompleted      EventType = "PurchaseCompleted"
	TypeRedemptionRequested    EventType = "RedemptionRequested"
	TypePurchaseRefunded       EventType = "PurchaseRefunded"
	TypeMemberOnboardRequested EventType = "MemberOnboardRequested"
	TypeMemberLinkRequested    EventType = "MemberLinkRequested"
	TypeMemberUnlinkRequested  EventType = "MemberUnlinkRequested"
)

// EventTypes lists every input event type in schema order.
func EventTypes() []EventType {
	return []EventType{
		TypePurchaseCompleted, TypeRedemptionRequested, TypePurchaseRefunded,
		TypeMemberOnboardRequested, TypeMemberLinkRequested, TypeMemberUnlinkRequested,
	}
}

// Outcome is what a successfully processed event did (LoyaltyResult.outcome).
type Outcome string

// Outcomes; see the Outcome enum's doc in schemas/result.avsc.
const (
	OutcomeApplied        Outcome = "APPLIED"
	OutcomeAlreadyApplied Outcome = "ALREADY_APPLIED"
	OutcomeLinked         Outcome = "LINKED"
	OutcomeUnlinked       Outcome = "UNLINKED"
	OutcomeAlreadyLinked  Outcome = "ALREADY_LINKED"
	OutcomeNotLinked      Outcome = "NOT_LINKED"
	OutcomeOnboarded      Outcome = "ONBOARDED"
	OutcomeNoOp           Outcome = "NO_OP"
)

// LinkState is a member's link state after a link or unlink command.
type LinkState string

// Link states.
const (
	LinkStateLinked    LinkState = "LINKED"
	LinkStateNotLinked LinkState = "NOT_LINKED"
)

// Category is why an event failed (LoyaltyError.category).
type Category string

// Failure categories; see the Category enum's doc in schemas/error.avsc.
const (
	CategoryDecode             Category = "DECODE"
	CategoryValidation         Category = "VALIDATION"
	CategoryBusiness           Category = "BUSINESS"
	CategoryAuth               Category = "AUTH"
	CategoryTransientExhausted Category = "TRANSIENT_EXHAUSTED"
	CategoryInternal           Category = "INTERNAL"
)

// Reasons the bridge itself gives in LoyaltyError.reason (as opposed to the
// API's apiErrorCode). Decode failures use the DecodeKind names of
// internal/codec.
const (
	// ReasonOriginalNotFound: a PurchaseRefunded whose originalTransactionId
	// the partner does not know (lookup-transaction-id found nothing), with
	// category BUSINESS.
	ReasonOriginalNotFound = "ORIGINAL_NOT_FOUND"
	// ReasonClawbackLimit: a PurchaseRefunded whose original already has
	// the most clawbacks the bridge looks through (BUSINESS); nothing was
	// clawed back.
	ReasonClawbackLimit = "CLAWBACK_LIMIT"
	// ReasonClawbackConflict: a transaction the partner holds under one of
	// the original's clawback ids is not a redemption, so the clawbacks
	// cannot be counted (BUSINESS); or the refund lost the free slot it
	// found to other writers too many times in a row, each write refused as
	// a duplicate (TRANSIENT_EXHAUSTED, retryable). Nothing was clawed back.
	ReasonClawbackConflict = "CLAWBACK_CONFLICT"
	// ReasonRefundKey: a PurchaseRefunded whose record key is neither its
	// loyaltyId nor its originalTransactionId (VALIDATION, retryable): the
	// cap on an original's clawbacks holds only while one process handles
	// the refunds of one original, which such keys do not ensure. Nothing
	// was called. A replay handles its records in one process and does not
	// refuse it.
	ReasonRefundKey = "REFUND_KEY"
	// ReasonUnrecognisedAnswer: the record was held, nothing written, for
	// as long as --unrecognised-hold, because the partner's lookup answers
	// were not in the partner profile (an unknown code, transactionType or
	// status, or the transactionId found as the other kind's transaction
	// from a partner keyed by id and type); then TRANSIENT_EXHAUSTED,
	// retryable: once the profile is fixed, a replay is guarded and reads
	// the answer.
	ReasonUnrecognisedAnswer = "UNRECOGNISED_ANSWER"
	// ReasonTransactionIDConflict: an accrual or redemption whose
	// transactionId the partner, keyed by id alone, holds as a transaction
	// of the other kind (BUSINESS, not retryable): the partner says this
	// one was not applied, and a write would collide with the other.
	// Nothing was written.
	ReasonTransactionIDConflict = "TRANSACTION_ID_CONFLICT"
)

// Event is an input event of one of the input topics. Implementations are
// the pointer types of this package's input structs.
type Event interface {
	// Type is the event's Avro record name.
	Type() EventType
	// ID is the event's transactionId: the key of its reply records.
	ID() string
	// Validate applies defaults and checks the event; it returns nil or a
	// *ValidationError listing every problem.
	Validate() error
}

// PurchaseCompleted earns points (API point-accrual).
type PurchaseCompleted struct {
	TransactionID   string    `avro:"transactionId" json:"transactionId"`
	LoyaltyID       string    `avro:"loyaltyId" json:"loyaltyId"`
	ItemID          *string   `avro:"itemId" json:"itemId,omitempty"`
	TransactionDate time.Time `avro:"transactionDate" json:"transactionDate"`
	Amount          float64   `avro:"amount" json:"amount"`
	Currency        string    `avro:"currency" json:"currency,omitempty"`
	// Description is a JSON object serialised to a string.
	Description *string `avro:"description" json:"description,omitempty"`
	// ExtraData is a JSON object serialised to a string.
	ExtraData *string `avro:"extraData" json:"extraData,omitempty"`
}

// RedemptionRequested spends points (API point-redemption-with-token).
type RedemptionRequested struct {
	TransactionID   string    `avro:"transactionId" json:"transactionId"`
	LoyaltyID       string    `avro:"loyaltyId" json:"loyaltyId"`
	TransactionDate time.Time `avro:"transactionDate" json:"transactionDate"`
	Amount          float64   `avro:"amount" json:"amount"`
	UsedPoint       int64     `avro:"usedPoint" json:"usedPoint"`
	// Description is free text (the API's redemption transactionDes is a string).
	Description *string `avro:"description" json:"description,omitempty"`
	// Sign, when set, is passed to the API unchanged; when nil the bridge signs.
	Sign *string `avro:"sign" json:"sign,omitempty"`
}

// PurchaseRefunded claws back the points of a refunded purchase.
type PurchaseRefunded struct {
	// TransactionID is the refund id (Avro alias refundId).
	TransactionID         string    `avro:"transactionId" json:"transactionId"`
	OriginalTransactionID string    `avro:"originalTransactionId" json:"originalTransactionId"`
	LoyaltyID             string    `avro:"loyaltyId" json:"loyaltyId"`
	RefundAmount          float64   `avro:"refundAmount" json:"refundAmount"`
	RefundDate            time.Time `avro:"refundDate" json:"refundDate"`
}

// MemberOnboardRequested enrols a member (API user/onboard). It holds personal
// data: see Format and MarshalLogObject.
type MemberOnboardRequested struct {
	TransactionID  string  `avro:"transactionId" json:"transactionId"`
	Phone          string  `avro:"phone" json:"phone"`
	FullName       string  `avro:"fullName" json:"fullName"`
	FirstName      *string `avro:"firstName" json:"firstName,omitempty"`
	LastName       *string `avro:"lastName" json:"lastName,omitempty"`
	Gender         string  `avro:"gender" json:"gender"`
	Birthday       string  `avro:"birthday" json:"birthday"`
	Email          *string `avro:"email" json:"email,omitempty"`
	IsKYC          bool    `avro:"isKYC" json:"isKYC"`
	IDNumber       *string `avro:"idNumber" json:"idNumber,omitempty"`
	PassportNumber *string `avro:"passportNumber" json:"passportNumber,omitempty"`
	PlaceOfIssue   string  `avro:"placeOfIssue" json:"placeOfIssue"`
	PlaceOfBirth   string  `avro:"placeOfBirth" json:"placeOfBirth"`
	IssueDate      string  `avro:"issueDate" json:"issueDate"`
	ExpireDate     string  `avro:"expireDate" json:"expireDate"`
	Nationality    string  `avro:"nationality" json:"nationality"`
	Address        string  `avro:"address" json:"address"`
	ExternalID     string  `avro:"externalId" json:"externalId"`
}

// MemberLinkRequested links a loyalty member to a partner member id.
type MemberLinkRequested struct {
	TransactionID   string `avro:"transactionId" json:"transactionId"`
	LoyaltyID       string `avro:"loyaltyId" json:"loyaltyId"`
	PartnerMemberID string `avro:"partnerMemberId" json:"partnerMemberId"`
}

// MemberUnlinkRequested unlinks a loyalty member from a partner member id.
type MemberUnlinkRequested struct {
	TransactionID   string `avro:"transactionId" json:"transactionId"`
	LoyaltyID       string `avro:"loyaltyId" json:"loyaltyId"`
	PartnerMemberID string `avro:"partnerMemberId" json:"partnerMemberId"`
}

func (*PurchaseCompleted) Type() EventType      { return TypePurchaseCompleted }
func (*RedemptionRequested) Type() EventType    { return TypeRedemptionRequested }
func (*PurchaseRefunded) Type() EventType       { return TypePurchaseRefunded }
func (*MemberOnboardRequested) Type() EventType { return TypeMemberOnboardRequested }
func (*MemberLinkRequested) Type() EventType    { return TypeMemberLinkRequested }
func (*MemberUnlinkRequested) Type() EventType  { return TypeMemberUnlinkRequested }

func (e *PurchaseCompleted) ID() string      { return e.TransactionID }
func (e *RedemptionRequested) ID() string    { return e.TransactionID }
func (e *PurchaseRefunded) ID() string       { return e.TransactionID }
func (e *MemberOnboardRequested) ID() string { return e.TransactionID }
func (e *MemberLinkRequested) ID() string    { return e.TransactionID }
func (e *MemberUnlinkRequested) ID() string  { return e.TransactionID }

// New returns a new zero event of type t, or nil for an unknown type.
func New(t EventType) Event {
	switch t {
	case TypePurchaseCompleted:
		return &PurchaseCompleted{}
	case TypeRedemptionRequested:
		return &RedemptionRequested{}
	case TypePurchaseRefunded:
		return &PurchaseRefunded{}
	case TypeMemberOnboardRequested:
		return &MemberOnboardRequested{}
	case TypeMemberLinkRequested:
		return &MemberLinkRequested{}
	case TypeMemberUnlinkRequested:
		return &MemberUnlinkRequested{}
	}
	return nil
}

// LoyaltyResult is the terminal success record of an input event.
type LoyaltyResult struct {
	TransactionID string     `avro:"transactionId" json:"transactionId"`
	EventType     EventType  `avro:"eventType" json:"eventType"`
	LoyaltyID     *string    `avro:"loyaltyId" json:"loyaltyId,omitempty"`
	Outcome       Outcome    `avro:"outcome" json:"outcome"`
	BitReference  *string    `avro:"bitReference" json:"bitReference,omitempty"`
	SponsorID     *int64     `avro:"sponsorId" json:"sponsorId,omitempty"`
	UsedPoint     *int64     `avro:"usedPoint" json:"usedPoint,omitempty"`
	Points        *int64     `avro:"points" json:"points,omitempty"`
	RequestID     *string    `avro:"requestId" json:"requestId,omitempty"`
	MemberCode    *string    `avro:"memberCode" json:"memberCode,omitempty"`
	CreatedAt     *string    `avro:"createdAt" json:"createdAt,omitempty"`
	APITimestamp  *string    `avro:"apiTimestamp" json:"apiTimestamp,omitempty"`
	LinkState     *LinkState `avro:"linkState" json:"linkState,omitempty"`
	StateChanged  *bool      `avro:"stateChanged" json:"stateChanged,omitempty"`
	APIErrorCode  *string    `avro:"apiErrorCode" json:"apiErrorCode,omitempty"`
	TierClass     *string    `avro:"tierClass" json:"tierClass,omitempty"`
	MemberStatus  *string    `avro:"memberStatus" json:"memberStatus,omitempty"`
	EKYCStatus    *string    `avro:"eKycStatus" json:"eKycStatus,omitempty"`
	Attempts      int32      `avro:"attempts" json:"attempts"`
	LatencyMs     int64      `avro:"latencyMs" json:"latencyMs"`
	ProcessedAt   time.Time  `avro:"processedAt" json:"processedAt"`
	Source        Source     `avro:"source" json:"source"`
	// ClawbackTransactionID is a refund's clawback redemption (its partner
	// transactionId), when one was made or found.
	ClawbackTransactionID *string `avro:"clawbackTransactionId" json:"clawbackTransactionId,omitempty"`
	// RequestedPoints is a refund's proportional points before the cap by
	// the original's earlier clawbacks.
	RequestedPoints *int64 `avro:"requestedPoints" json:"requestedPoints,omitempty"`
}

// Source is the Kafka position of the input record a result answers.
type Source struct {
	Topic     string `avro:"topic" json:"topic"`
	Partition int32  `avro:"partition" json:"partition"`
	Offset    int64  `avro:"offset" json:"offset"`
}

// LoyaltyError is the terminal failure record of an input event.
type LoyaltyError struct {
	// TransactionID is the event's transactionId, or "topic/partition/offset"
	// (see SourceID) when the record could not be decoded.
	TransactionID   string      `avro:"transactionId" json:"transactionId"`
	EventType       *EventType  `avro:"eventType" json:"eventType,omitempty"`
	Category        Category    `avro:"category" json:"category"`
	Retryable       bool        `avro:"retryable" json:"retryable"`
	Reason          *string     `avro:"reason" json:"reason,omitempty"`
	HTTPStatus      *int32      `avro:"httpStatus" json:"httpStatus,omitempty"`
	APIStatusCode   *int32      `avro:"apiStatusCode" json:"apiStatusCode,omitempty"`
	APIMessage      *string     `avro:"apiMessage" json:"apiMessage,omitempty"`
	APIErrorCode    *string     `avro:"apiErrorCode" json:"apiErrorCode,omitempty"`
	APIErrorMessage *string     `avro:"apiErrorMessage" json:"apiErrorMessage,omitempty"`
	APIErrorName    *string     `avro:"apiErrorName" json:"apiErrorName,omitempty"`
	ResultURL       *string     `avro:"resultUrl" json:"resultUrl,omitempty"`
	Detail          string      `avro:"detail" json:"detail"`
	Attempts        int32       `avro:"attempts" json:"attempts"`
	Source          ErrorSource `avro:"source" json:"source"`
	OriginalKey     []byte      `avro:"originalKey" json:"originalKey,omitempty"`
	OriginalValue   []byte      `avro:"originalValue" json:"originalValue,omitempty"`
	ProcessedAt     time.Time   `avro:"processedAt" json:"processedAt"`
}

// ErrorSource is the Kafka position and timestamp of the input record an
// error answers.
type ErrorSource struct {
	Topic     string    `avro:"topic" json:"topic"`
	Partition int32     `avro:"partition" json:"partition"`
	Offset    int64     `avro:"offset" json:"offset"`
	Timestamp time.Time `avro:"timestamp" json:"timestamp"`
}

// Position is a record's place in Kafka. Replay and reconcile key the
// records they read again by it.
type Position struct {
	Topic     string
	Partition int32
	Offset    int64
}

// String is SourceID's "topic/partition/offset".
func (p Position) String() string { return SourceID(p.Topic, p.Partition, p.Offset) }

// Compare orders positions by topic, partition and offset.
func (p Position) Compare(q Position) int {
	return cmp.Or(cmp.Compare(p.Topic, q.Topic), cmp.Compare(p.Partition, q.Partition), cmp.Compare(p.Offset, q.Offset))
}

// SourceID is the transactionId of an error event for a record that could
// not be decoded: "topic/partition/offset".
func SourceID(topic string, partition int32, offset int64) string {
	return topic + "/" + strconv.FormatInt(int64(partition), 10) + "/" + strconv.FormatInt(offset, 10)
}
