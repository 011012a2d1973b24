package config

import (
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
)

// The profile comes from the YAML file, the environment and flags like
// every setting; its defaults are the simulator's.
func TestPartnerProfileSources(t *testing.T) {
	file := filepath.Join(t.TempDir(), "partner.yaml")
	yml := `partner-not-found-codes: [TXN_NOT_FOUND, NO_SUCH_TXN]
partner-member-not-found-codes: NO_SUCH_MEMBER
partner-duplicate-codes: TXN_DUPLICATE
partner-accrual-type: EARN
partner-redemption-type: BURN
partner-applied-statuses: [COMPLETED, POSTED]
partner-failed-statuses: FAILED
partner-accrual-date-format: iso8601
partner-redemption-date-format: epoch-millis
partner-fractional-points: round-half-up
partner-result-url-params: [errorCode]
partner-accrual-date-type: string
partner-redemption-date-type: number
partner-unset-keyed-fields: "null"
partner-transaction-key: id
partner-jwt-algorithm: PS256
partner-jwt-issuer: shop-1
partner-sign-audience: loyalty
partner-sign-type: none
partner-sign-lifetime: 1m
partner-sign-jti: transaction-id
partner-sign-claims: [transactionId=txn, "usedPoint:string"]
partner-token-audience: none
partner-token-type: pt
partner-token-lifetime: 90s
partner-token-jti: none
partner-apply-window: 5s
partner-token-lifetime-unit: milliseconds
`
	if err := os.WriteFile(file, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(extra map[string]string) map[string]string {
		m := maps.Clone(creds)
		maps.Copy(m, extra)
		return m
	}
	fromFile := partnerprofile.Profile{NotFoundCodes: []string{"TXN_NOT_FOUND", "NO_SUCH_TXN"}, MemberNotFoundCodes: []string{"NO_SUCH_MEMBER"},
		DuplicateCodes: []string{"TXN_DUPLICATE"},
		AccrualType:    "EARN", RedemptionType: "BURN", AppliedStatuses: []string{"COMPLETED", "POSTED"}, FailedStatuses: []string{"FAILED"},
		AccrualDateFormat: partnerprofile.DateISO8601, RedemptionDateFormat: partnerprofile.DateEpochMillis,
		FractionalPoints: partnerprofile.FractionsRoundHalfUp, ResultURLParams: []string{"errorCode"}, ApplyWindow: 5 * time.Second,
		AccrualDateType: partnerprofile.DateString, RedemptionDateType: partnerprofile.DateNumber, UnsetKeyed: partnerprofile.KeyedNull,
		TransactionKey: partnerprofile.KeyID, TokenLifetimeUnit: partnerprofile.LifetimeMilliseconds,
		JWT: partnerprofile.JWT{Algorithm: "PS256", Issuer: "shop-1",
			Sign:         partnerprofile.Claims{Audience: "loyalty", Type: "none", Lifetime: time.Minute, JTI: partnerprofile.JTITransactionID},
			PartnerToken: partnerprofile.Claims{Audience: "none", Type: "pt", Lifetime: 90 * time.Second, JTI: partnerprofile.JTINone},
			SignClaims:   []partnerprofile.SignClaim{{Field: "transactionId", Claim: "txn"}, {Field: "usedPoint", Encoding: partnerprofile.ClaimAsString}}}}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want partnerprofile.Profile
		err  string
	}{
		{name: "defaults", want: partnerprofile.Default()},
		{name: "file", args: []string{"--config", file}, want: fromFile},
		{name: "environment over file", args: []string{"--config", file},
			env: map[string]string{"LOYALTY_BRIDGE_PARTNER_ACCRUAL_TYPE": "ACCRUE", "LOYALTY_BRIDGE_PARTNER_NOT_FOUND_CODES": "A, B"},
			want: func() partnerprofile.Profile {
				p := fromFile
				p.AccrualType, p.NotFoundCodes = "ACCRUE", []string{"A", "B"}
				return p
			}()},
		{name: "flag over environment", args: []string{"--partner-applied-statuses", "DONE"},
			env: map[string]string{"LOYALTY_BRIDGE_PARTNER_APPLIED_STATUSES": "OK"},
			want: func() partnerprofile.Profile {
				p := partnerprofile.Default()
				p.AppliedStatuses = []string{"DONE"}
				return p
			}()},
		{name: "legacy date flag still works", env: map[string]string{"LOYALTY_BRIDGE_API_TRANSACTION_DATE_FORMAT": "iso8601"},
			want: func() partnerprofile.Profile {
				p := partnerprofile.Default()
				p.AccrualDateFormat = partnerprofile.DateISO8601
				return p
			}()},
		{name: "legacy and new agreeing", args: []string{"--transaction-date-format", "iso8601", "--partner-accrual-date-format", "iso8601"},
			want: func() partnerprofile.Profile {
				p := partnerprofile.Default()
				p.AccrualDateFormat = partnerprofile.DateISO8601
				return p
			}()},
		{name: "legacy and new differing", args: []string{"--transaction-date-format", "iso8601", "--partner-accrual-date-format", "epoch-millis"},
			err: "--transaction-date-format iso8601 and --partner-accrual-date-format epoch-millis differ"},
		{name: "contradictions", args: []string{"--partner-not-found-codes", "X", "--partner-duplicate-codes", "X",
			"--partner-accrual-type", "T", "--partner-redemption-type", "T", "--partner-failed-statuses", "SUCCESS",
			"--partner-fractional-points", "floor", "--partner-redemption-date-format", "julian",
			"--partner-sign-claims", "usedPoint:hex", "--partner-accrual-date-type", "date", "--partner-token-jti", "transaction-id",
			"--partner-transaction-key", "type", "--partner-token-lifetime-unit", "ms"},
			err: `--partner-token-lifetime-unit "ms"|--partner-transaction-key "type"|--partner-sign-claims: sign claim "usedPoint:hex"|--partner-accrual-date-type "date"|partner token jti transaction-id|code "X" is both|same transactionType "T"|status "SUCCESS" is both|--partner-fractional-points "floor"|--partner-redemption-date-format "julian"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parse(t, tc.args, env(tc.env))
			if tc.err != "" {
				for _, want := range strings.Split(tc.err, "|") {
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Errorf("want %q in %v", want, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Partner.Build(); !reflect.DeepEqual(got, tc.want.WithDefaults()) {
				t.Errorf("profile\n%+v, want\n%+v", got, tc.want.WithDefaults())
			}
		})
	}
}
