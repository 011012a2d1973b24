package apicall

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/signing"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
)

// Conn is what a call goes through.
type Conn struct {
	Client *loyalty.Client
	Tokens tokensource.Source
	Grant  string // the grant Tokens uses, reported by the token call
	// Signer is the partner-key signer (nil without a partner key), and
	// Profile the partner profile the client and signer follow.
	Signer  *signing.Signer
	Profile partnerprofile.Profile
}

// Func makes a call once its flag set is parsed; body is the JSON request
// (nil: none). The answer is a value to print as JSON.
type Func func(ctx context.Context, c Conn, body []byte) (any, error)

// Call is one endpoint callable by name.
type Call struct {
	Summary string
	// Arg says that the call takes its id as one positional argument too.
	Arg    bool
	define func(fs *flag.FlagSet) callFunc
}

type callFunc func(ctx context.Context, c Conn, body []byte, set map[string]bool) (any, error)

// Define puts the call's request flags on fs and returns the Func that
// makes the call from them after fs is parsed.
func (c Call) Define(fs *flag.FlagSet) Func {
	run := c.define(fs)
	return func(ctx context.Context, conn Conn, body []byte) (any, error) {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		return run(ctx, conn, body, set)
	}
}

// Calls returns the calls by name.
func Calls() map[string]Call {
	return map[string]Call{
		"token":       {"obtain an access token; prints type and expiry, never the token", false, token},
		"profile":     {"Customer Info: GET user-profile/{loyaltyId}", true, profile(false)},
		"profile-ext": {"Customer Profile: GET user-profile-ext/{loyaltyId}", true, profile(true)},
		"onboard":     {"User Onboarding: JSON body on stdin (-) or --json FILE", false, onboard},
		"link":        {"link-member: --loyalty-id --partner-member-id", false, link(false)},
		"unlink":      {"unlink-member: --loyalty-id --partner-member-id", false, link(true)},
		"accrue":      {"Point Accrual: --loyalty-id --transaction-id --amount [--date --currency ...]", false, accrue},
		"redeem":      {"Point Redemption With Token: --loyalty-id --transaction-id --amount --points (signs with --partner-key)", false, redeem},
		"lookup":      {"Lookup Transaction: --loyalty-id and --transaction-id or --bit-reference", false, lookup},
		"sign": {"--explain: the claims of the sign a redemption would carry, and of a partner token, as the profile makes them (secrets masked); calls nothing",
			false, sign},
	}
}

// UsageError is a request that could not be built from the flags and body.
type UsageError struct{ msg string }

func (u *UsageError) Error() string { return u.msg }

// Envelope is the API's error envelope of a business error, as the API
// sent it (statusCode, message, errors, data.resultUrl): what the api
// command prints for one.
func Envelope(be *loyalty.BusinessError) map[string]any {
	env := map[string]any{"statusCode": be.StatusCode, "message": be.StatusMessage}
	errs := map[string]string{"code": be.Code, "message": be.Message}
	if be.ErrorCode != "" {
		errs["errorCode"] = be.ErrorCode
	}
	if be.Name != "" {
		errs["name"] = be.Name
	}
	env["errors"] = errs
	if be.ResultURL != "" {
		env["data"] = map[string]string{"resultUrl": be.ResultURL}
	}
	return env
}

// MaxBody bounds a request body read from a stream.
const MaxBody = 1 << 20

// ReadBody reads the JSON request body from the file named src, or from in
// when src is "-" (at most MaxBody bytes); "" is no body.
func ReadBody(src string, in io.Reader) ([]byte, error) {
	var body []byte
	var err error
	switch src {
	case "":
		return nil, nil
	case "-":
		body, err = io.ReadAll(io.LimitReader(in, MaxBody))
	default:
		body, err = os.ReadFile(src)
	}
	if err != nil {
		return nil, &UsageError{"request JSON: " + err.Error()}
	}
	return body, nil
}

// decode reads the JSON body (if any) into v.
func decode(body []byte, v any) error {
	if len(body) == 0 {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &UsageError{"request JSON: " + err.Error()}
	}
	return nil
}

// over sets *dst to v when the flag was given or *dst is still empty.
func over[T comparable](set map[string]bool, name string, dst *T, v T) {
	var zero T
	if set[name] || *dst == zero {
		*dst = v
	}
}

// TokenInfo is what the token call reports: never the token itself.
type TokenInfo struct {
	Grant            string `json:"grant"`
	TokenType        string `json:"token_type"`
	ExpiresIn        int64  `json:"expires_in"`
	ExpiresAt        string `json:"expires_at"`
	RefreshExpiresIn int64  `json:"refresh_expires_in,omitempty"`
	RefreshExpiresAt string `json:"refresh_expires_at,omitempty"`
	Scope            string `json:"scope,omitempty"`
}

func token(*flag.FlagSet) callFunc {
	return func(ctx context.Context, c Conn, _ []byte, _ map[string]bool) (any, error) {
		tok, err := c.Tokens.Token(ctx)
		if err != nil {
			var te *tokensource.Error
			if errors.As(err, &te) && !te.Transient() {
				return nil, &loyalty.AuthError{Op: "token", HTTPStatus: te.Status, Code: te.Code, Err: err}
			}
			return nil, &loyalty.TransientError{Op: "token", Status: 0, Attempts: 1, Err: err}
		}
		info := TokenInfo{Grant: c.Grant, TokenType: tok.TokenType, ExpiresIn: int64(tok.Lifetime().Seconds()),
			ExpiresAt: tok.Expiry.UTC().Format(time.RFC3339), Scope: tok.Scope}
		if !tok.RefreshExpiry.IsZero() {
			info.RefreshExpiresIn = int64(tok.RefreshExpiry.Sub(tok.IssuedAt).Seconds())
			info.RefreshExpiresAt = tok.RefreshExpiry.UTC().Format(time.RFC3339)
		}
		return info, nil
	}
}

func profile(ext bool) func(*flag.FlagSet) callFunc {
	return func(fs *flag.FlagSet) callFunc {
		id := fs.String("loyalty-id", "", "member loyaltyId (or give it as the argument)")
		return func(ctx context.Context, c Conn, _ []byte, _ map[string]bool) (any, error) {
			if *id == "" && fs.NArg() == 1 {
				*id = fs.Arg(0)
			}
			if ext {
				v, _, err := c.Client.CustomerProfile(ctx, *id)
				return v, err
			}
			v, _, err := c.Client.CustomerInfo(ctx, *id)
			return v, err
		}
	}
}

func onboard(*flag.FlagSet) callFunc {
	return func(ctx context.Context, c Conn, body []byte, _ map[string]bool) (any, error) {
		if len(body) == 0 {
			return nil, &UsageError{"onboard takes its body as JSON: --json FILE or - for stdin"}
		}
		var r loyalty.OnboardRequest
		if err := decode(body, &r); err != nil {
			return nil, err
		}
		v, _, err := c.Client.Onboard(ctx, r)
		return v, err
	}
}

func link(unlink bool) func(*flag.FlagSet) callFunc {
	return func(fs *flag.FlagSet) callFunc {
		var f loyalty.LinkRequest
		fs.StringVar(&f.LoyaltyID, "loyalty-id", "", "member loyaltyId")
		fs.StringVar(&f.PartnerMemberID, "partner-member-id", "", "the partner's member id")
		return func(ctx context.Context, c Conn, body []byte, set map[string]bool) (any, error) {
			var r loyalty.LinkRequest
			if err := decode(body, &r); err != nil {
				return nil, err
			}
			over(set, "loyalty-id", &r.LoyaltyID, f.LoyaltyID)
			over(set, "partner-member-id", &r.PartnerMemberID, f.PartnerMemberID)
			if unlink {
				v, _, err := c.Client.Unlink(ctx, r)
				return v, err
			}
			v, _, err := c.Client.Link(ctx, r)
			return v, err
		}
	}
}

func accrue(fs *flag.FlagSet) callFunc {
	var (
		f                 loyalty.AccrualRequest
		date, desc, extra string
	)
	fs.StringVar(&f.LoyaltyID, "loyalty-id", "", "member loyaltyId")
	fs.StringVar(&f.TransactionID, "transaction-id", "", "partner transaction id")
	fs.StringVar(&f.ItemID, "item-id", "", "partner transaction item id")
	fs.Float64Var(&f.TransactionAmount, "amount", 0, "transactionAmount (≥ 0)")
	fs.StringVar(&f.TransactionCurrency, "currency", "VND", "transactionCurrency")
	fs.StringVar(&date, "date", "", "transactionDate: RFC 3339 or epoch milliseconds (default now)")
	fs.StringVar(&desc, "description", "", "transactionDes as a JSON object")
	fs.StringVar(&extra, "extra-data", "", "extraData as a JSON object")
	return func(ctx context.Context, c Conn, body []byte, set map[string]bool) (any, error) {
		var r loyalty.AccrualRequest
		if err := decode(body, &r); err != nil {
			return nil, err
		}
		over(set, "loyalty-id", &r.LoyaltyID, f.LoyaltyID)
		over(set, "transaction-id", &r.TransactionID, f.TransactionID)
		over(set, "item-id", &r.ItemID, f.ItemID)
		over(set, "amount", &r.TransactionAmount, f.TransactionAmount)
		over(set, "currency", &r.TransactionCurrency, f.TransactionCurrency)
		if date != "" {
			if err := r.TransactionDate.UnmarshalJSON([]byte(strconv.Quote(date))); err != nil {
				return nil, &UsageError{"--date: " + err.Error()}
			}
		}
		if r.TransactionDate.Time.IsZero() {
			r.TransactionDate.Time = time.Now()
		}
		r.TransactionDate.Format = "" // the wire format is --date-format's, whatever the input's

		for _, j := range []struct {
			name, v string
			dst     *json.RawMessage
		}{{"description", desc, &r.TransactionDes}, {"extra-data", extra, &r.ExtraData}} {
			if j.v == "" {
				continue
			}
			if !json.Valid([]byte(j.v)) || !strings.HasPrefix(strings.TrimSpace(j.v), "{") {
				return nil, &UsageError{"--" + j.name + " must be a JSON object"}
			}
			*j.dst = json.RawMessage(j.v)
		}
		v, _, err := c.Client.Accrue(ctx, r)
		return v, err
	}
}

// redemptionFlags puts a redemption's request flags on fs and returns the
// builder of the request from the body and the flags given.
func redemptionFlags(fs *flag.FlagSet) func(c Conn, body []byte, set map[string]bool) (loyalty.RedemptionRequest, error) {
	var f loyalty.RedemptionRequest
	fs.StringVar(&f.LoyaltyID, "loyalty-id", "", "member loyaltyId")
	fs.StringVar(&f.TransactionID, "transaction-id", "", "partner transaction id")
	fs.StringVar(&f.TransactionDes, "description", "", "transactionDes")
	fs.StringVar(&f.TransactionDate, "date", "", "transactionDate text, in --partner-redemption-date-format (default now)")
	fs.Float64Var(&f.TransactionAmount, "amount", 0, "transactionAmount (≥ 0)")
	fs.Int64Var(&f.UsedPoint, "points", 0, "usedPoint (> 0)")
	fs.StringVar(&f.Sign, "sign", "", "a ready-made sign JWT (default: signed with --partner-key)")
	return func(c Conn, body []byte, set map[string]bool) (loyalty.RedemptionRequest, error) {
		var r loyalty.RedemptionRequest
		if err := decode(body, &r); err != nil {
			return r, err
		}
		over(set, "loyalty-id", &r.LoyaltyID, f.LoyaltyID)
		over(set, "transaction-id", &r.TransactionID, f.TransactionID)
		over(set, "description", &r.TransactionDes, f.TransactionDes)
		over(set, "date", &r.TransactionDate, f.TransactionDate)
		over(set, "amount", &r.TransactionAmount, f.TransactionAmount)
		over(set, "points", &r.UsedPoint, f.UsedPoint)
		over(set, "sign", &r.Sign, f.Sign)
		if r.TransactionDate == "" {
			r.TransactionDate = c.Profile.RedemptionDate(time.Now())
		}
		return r, nil
	}
}

func redeem(fs *flag.FlagSet) callFunc {
	build := redemptionFlags(fs)
	return func(ctx context.Context, c Conn, body []byte, set map[string]bool) (any, error) {
		r, err := build(c, body, set)
		if err != nil {
			return nil, err
		}
		v, _, err := c.Client.Redeem(ctx, r)
		return v, err
	}
}

// Masked stands for a secret in an explanation.
const Masked = "***"

// JWTExplanation is a JWT's header and claims.
type JWTExplanation struct {
	Header map[string]any `json:"header"`
	Claims map[string]any `json:"claims"`
}

// Explanation is what `api sign --explain` prints: the JWTs the partner
// profile makes, for an integrator to hold against the partner's
// documentation. It carries no key and no JWT: the sign in Body is Masked.
type Explanation struct {
	Sign JWTExplanation `json:"sign"`
	// Covers is each body field the sign covers, as the profile's setting
	// writes it: field[=claim][:string].
	Covers []string `json:"covers"`
	// Body is the redemption as it would be sent.
	Body         json.RawMessage `json:"body"`
	PartnerToken JWTExplanation  `json:"partnerToken"`
}

func sign(fs *flag.FlagSet) callFunc {
	explain := fs.Bool("explain", false, "print the claims (required: a sign is a credential, never printed)")
	build := redemptionFlags(fs)
	return func(_ context.Context, c Conn, body []byte, set map[string]bool) (any, error) {
		if !*explain {
			return nil, &UsageError{"api sign prints only its --explain: a sign is a credential, never printed (api redeem signs and sends one)"}
		}
		if c.Signer == nil {
			return nil, &UsageError{"api sign --explain needs --partner-key: the claims are those its signer makes"}
		}
		r, err := build(c, body, set)
		if err != nil {
			return nil, err
		}
		if r.LoyaltyID == "" || r.TransactionID == "" {
			return nil, &UsageError{"api sign --explain needs --loyalty-id and --transaction-id (the claims cover them)"}
		}
		var x Explanation
		claims, err := c.Signer.RedemptionSignClaims(loyalty.SignedFields(r))
		if err != nil {
			return nil, &UsageError{err.Error()}
		}
		x.Sign = JWTExplanation{Header: c.Signer.Header(), Claims: claims}
		for _, f := range c.Profile.WithDefaults().JWT.SignClaims {
			x.Covers = append(x.Covers, f.String())
		}
		r.Sign = Masked
		if x.Body, err = loyalty.EncodeRedemption(c.Profile, r); err != nil {
			return nil, &UsageError{err.Error()}
		}
		x.PartnerToken = JWTExplanation{Header: c.Signer.Header(), Claims: c.Signer.PartnerTokenClaims()}
		return x, nil
	}
}

func lookup(fs *flag.FlagSet) callFunc {
	var f loyalty.LookupRequest
	fs.StringVar(&f.LoyaltyID, "loyalty-id", "", "member loyaltyId")
	fs.StringVar(&f.TransactionID, "transaction-id", "", "partner transaction id")
	fs.StringVar(&f.BitReference, "bit-reference", "", "service transaction reference")
	return func(ctx context.Context, c Conn, body []byte, set map[string]bool) (any, error) {
		var r loyalty.LookupRequest
		if err := decode(body, &r); err != nil {
			return nil, err
		}
		over(set, "loyalty-id", &r.LoyaltyID, f.LoyaltyID)
		over(set, "transaction-id", &r.TransactionID, f.TransactionID)
		over(set, "bit-reference", &r.BitReference, f.BitReference)
		v, _, err := c.Client.LookupTransaction(ctx, r)
		return v, err
	}
}
