package loyalty_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/loyalty-bridge/loyalty-bridge/internal/loyalty"
	"github.com/loyalty-bridge/loyalty-bridge/internal/partnerprofile"
	"github.com/loyalty-bridge/loyalty-bridge/internal/tokensource"
)

// partnerAPI stands in for the service (tests use internal/sim).
func partnerAPI() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/realms/loyalty-partner/protocol/openid-connect/token":
			fmt.Fprint(w, `{"access_token":"a.b.c","expires_in":300,"refresh_expires_in":1800,"refresh_token":"d.e.f","token_type":"Bearer"}`)
		case "/api-user/partner/v1/user-profile/LB00000001":
			fmt.Fprint(w, `{"statusCode":200,"message":"SUCCESS","data":{"loyaltyId":"LB00000001","status":"ACTIVE"}}`)
		default:
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"statusCode":400,"message":"Bad Request","errors":{"code":"MEMBER_NOT_FOUND","message":"Member not found","errorCode":"MEMBER_NOT_FOUND"}}`)
		}
	}))
}

// Build one HTTP client, one token source and one loyalty client per
// process, and share them between workers.
func Example() {
	srv := partnerAPI()
	defer srv.Close()

	hc, err := loyalty.NewHTTPClient(loyalty.TransportOptions{MaxConns: 32})
	if err != nil {
		panic(err)
	}
	defer hc.CloseIdleConnections()
	grant, err := tokensource.NewPassword(tokensource.PasswordOptions{
		AuthURL: srv.URL, HTTPClient: hc,
		ClientID: "partner-app", ClientSecret: "from a secret file",
		Username: "partner-user", Password: "from a secret file",
	})
	if err != nil {
		panic(err)
	}
	client, err := loyalty.New(loyalty.Options{
		BaseURL:    srv.URL,
		Tokens:     tokensource.NewCache(grant, tokensource.CacheOptions{}),
		HTTPClient: hc,
	})
	if err != nil {
		panic(err)
	}

	ctx := context.Background()
	profile, info, err := client.CustomerInfo(ctx, "LB00000001")
	if err != nil {
		panic(err)
	}
	fmt.Println(profile.LoyaltyID, profile.Status, "attempts:", info.Attempts)

	_, info, err = client.CustomerInfo(ctx, "LB99999999")
	var be *loyalty.BusinessError
	if errors.As(err, &be) {
		fmt.Println(be.HTTPStatus, be.APICode(), loyalty.Category(err), "ambiguous:", info.Ambiguous)
	}
	fmt.Println(errors.Is(err, loyalty.ErrMemberNotFound))
	// Output:
	// LB00000001 ACTIVE attempts: 1
	// 400 MEMBER_NOT_FOUND BUSINESS ambiguous: false
	// true
}

// A lookup answer means what the partner profile says, and nothing else:
// an answer it does not name is unrecognised, never guessed at. This
// partner keys transactions by id alone, so a BURN under the id asked for
// an accrual is all there is; keyed by id and type (the default), it would
// be unrecognised too (sharedTransactionId).
func ExampleClassifyLookup() {
	partner := partnerprofile.Profile{NotFoundCodes: []string{"TXN_NOT_FOUND"}, AccrualType: "EARN", RedemptionType: "BURN",
		AppliedStatuses: []string{"COMPLETED"}, FailedStatuses: []string{"FAILED"}, TransactionKey: partnerprofile.KeyID}
	answers := []struct {
		t   *loyalty.Transaction
		err error
	}{
		{&loyalty.Transaction{TransactionType: "EARN", Status: "COMPLETED"}, nil},
		{&loyalty.Transaction{TransactionType: "EARN", Status: "FAILED"}, nil},
		{&loyalty.Transaction{TransactionType: "BURN", Status: "COMPLETED"}, nil},
		{nil, &loyalty.BusinessError{HTTPStatus: 400, Code: "TXN_NOT_FOUND"}},
		{&loyalty.Transaction{TransactionType: "EARN", Status: "PENDING"}, nil},
		{nil, &loyalty.BusinessError{HTTPStatus: 400, Code: "TRANSACTION_NOT_FOUND"}},
	}
	for _, a := range answers {
		v, err := loyalty.ClassifyLookup(partner, partnerprofile.Accrual, a.t, a.err)
		var ue *loyalty.UnrecognisedAnswerError
		if errors.As(err, &ue) {
			fmt.Println(v, ue.Field, ue.Value)
			continue
		}
		fmt.Println(v)
	}
	// Output:
	// applied
	// not_applied
	// other_kind
	// not_found
	// unrecognised status PENDING
	// unrecognised errorCode TRANSACTION_NOT_FOUND
}
