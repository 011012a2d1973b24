package sim

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
)

// ict is the service's local zone (+07:00), used for transactionTime and
// profile dates.
var ict = time.FixedZone("ICT", 7*3600)

const (
	isoMillisUTC   = "2006-01-02T15:04:05.000Z"
	isoMillisZoned = "2006-01-02T15:04:05.000-07:00"
	profileDate    = "02-01-2006"
	isoDate        = "2006-01-02"
)

// Transaction types and status of the default profile (partnerprofile
// owns them; Options.Profile may name others), and the fixed values of
// transaction records.
const (
	TypeAccrual       = partnerprofile.DefaultAccrualType
	TypeRedemption    = partnerprofile.DefaultRedemptionType
	TransactionSource = "PARTNER"
	StatusSuccess     = partnerprofile.DefaultAppliedStatus
)

// member is one member's state. Seeded members are materialised on first
// use, so a large --members costs nothing until touched.
type member struct {
	id                                  string
	phone, fullName, first, last, email string
	birth, joined                       time.Time
	ekyc, status, tier, sponsor         string
	nationalID, passport                string
	externalID                          string
	balance                             milli
	linked                              bool
	partnerMemberID                     string
}

// txn is one applied accrual or redemption.
type txn struct {
	kind          string
	loyaltyID     string
	transactionID string
	bitReference  string
	requestID     string
	points        milli
	amount        float64
	at            time.Time // when applied
	txTime        time.Time // the partner's transactionDate, else at
	// result is the data of the original answer, returned again under
	// DuplicateReturnOriginal.
	result any
}

// state is all business state behind one mutex: calls are short and the
// simulator's cost is dominated by JSON and HTTP, not by this lock.
type state struct {
	mu          sync.Mutex
	seeded      int
	initBalance milli
	members     map[string]*member
	nextMember  int
	externalIDs map[string]string // externalId → loyaltyId
	partnerIDs  map[string]string // linked partnerMemberId → loyaltyId
	accruals    map[string]*txn   // by transactionId
	redemptions map[string]*txn   // by transactionId
	byBitRef    map[string]*txn
	ledger      map[string]int // transactionId → effects applied
	seq         int64
}

func (st *state) init(o Options) {
	st.seeded, st.initBalance = o.Members, wholePoints(o.InitialBalance)
	st.members = map[string]*member{}
	st.nextMember = o.Members + 1
	st.externalIDs = map[string]string{}
	st.partnerIDs = map[string]string{}
	st.accruals = map[string]*txn{}
	st.redemptions = map[string]*txn{}
	st.byBitRef = map[string]*txn{}
	st.ledger = map[string]int{}
}

var (
	lastNames  = []string{"Nguyen", "Tran", "Le", "Pham", "Hoang", "Vu", "Dang", "Bui", "Do", "Ho"}
	firstNames = []string{"An", "Binh", "Chi", "Dung", "Giang", "Hoa", "Khanh", "Linh", "Minh", "Nam", "Phuong", "Quan"}
	tiers      = []string{"BASIC", "SILVER", "GOLD", "PLATINUM"}
)

// seededIndex is i when id is MemberID(i) of a seeded member, else 0.
func (st *state) seededIndex(id string) int {
	if len(id) != 10 || !strings.HasPrefix(id, "LB") {
		return 0
	}
	i, err := strconv.Atoi(id[2:])
	if err != nil || i < 1 || i > st.seeded {
		return 0
	}
	return i
}

// get returns the member, materialising a seeded one. Caller holds mu.
func (st *state) get(id string) *member {
	if m, ok := st.members[id]; ok {
		return m
	}
	i := st.seededIndex(id)
	if i == 0 {
		return nil
	}
	first, last := firstNames[i%len(firstNames)], lastNames[(i/len(firstNames))%len(lastNames)]
	m := &member{
		id: id, first: first, last: last, fullName: last + " " + first,
		phone:  fmt.Sprintf("+8490%07d", i%10_000_000),
		email:  fmt.Sprintf("member%d@example.com", i),
		birth:  time.Date(1970, 1, 1, 0, 0, 0, 0, ict).AddDate(0, 0, (i*7919)%12000),
		joined: time.Date(2020, 1, 1, 0, 0, 0, 0, ict).AddDate(0, 0, i%1500),
		ekyc:   "VERIFIED", status: "ACTIVE", tier: tiers[i%len(tiers)], sponsor: SponsorName,
		nationalID: fmt.Sprintf("0792%08d", i),
		balance:    st.initBalance,
	}
	if i%3 == 0 {
		m.passport = fmt.Sprintf("C%07d", i%10_000_000)
	}
	st.members[id] = m
	return m
}

// bitRef returns the next service transaction reference. Caller holds mu.
func (st *state) bitRef() string {
	st.seq++
	return fmt.Sprintf("BIT%012d", st.seq)
}

// MemberState is a member as the simulator holds it (tests and the admin
// API read it; it may hold personal data, so never log it).
type MemberState struct {
	LoyaltyID string `json:"loyaltyId"`
	// Balance is in points; it has a fraction once a fractional usedPoint
	// was redeemed.
	Balance         float64 `json:"balance"`
	Linked          bool    `json:"linked"`
	PartnerMemberID string  `json:"partnerMemberId,omitempty"`
	ExternalID      string  `json:"externalId,omitempty"`
	Status          string  `json:"status"`
	EKYCStatus      string  `json:"eKycStatus"`
	TierClass       string  `json:"tierClass"`
}

// Member returns the state of a seeded or onboarded member.
func (s *Server) Member(loyaltyID string) (MemberState, bool) {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	m := s.st.get(loyaltyID)
	if m == nil {
		return MemberState{}, false
	}
	return MemberState{LoyaltyID: m.id, Balance: m.balance.float(), Linked: m.linked, PartnerMemberID: m.partnerMemberID,
		ExternalID: m.externalID, Status: m.status, EKYCStatus: m.ekyc, TierClass: m.tier}, true
}

// Effects is how many times an accrual or redemption with transactionID
// was applied. Under DuplicateReject and DuplicateReturnOriginal it is 0
// or 1 (2 only when one id was used for both kinds); under DuplicateApply
// every repeated write counts, so a value above 1 is a double effect the
// client caused.
func (s *Server) Effects(transactionID string) int {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	return s.st.ledger[transactionID]
}

// Ledger returns a copy of every transactionId's effect count.
func (s *Server) Ledger() map[string]int {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	return maps.Clone(s.st.ledger)
}

// EffectsOver returns the transactionIds applied more than n times, with
// their effect counts (GET /__sim/ledger?over=N): EffectsOver(1) lists the
// double effects, which a test expects to be empty.
func (s *Server) EffectsOver(n int) map[string]int {
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	out := map[string]int{}
	for id, e := range s.st.ledger {
		if e > n {
			out[id] = e
		}
	}
	return out
}
