package sim_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/loyalty-bridge/loyalty-bridge/internal/sim"
)

// A simulator in a test: log in with the demo credentials, accrue, and
// read the effect through the typed methods.
func Example() {
	s, err := sim.New(sim.Options{Members: 3, InitialBalance: 500})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(s)
	defer srv.Close()
	defer s.Close()

	res, err := http.PostForm(srv.URL+sim.PathToken, url.Values{"grant_type": {"password"},
		"client_id": {sim.DefaultClientID}, "client_secret": {sim.DefaultClientSecret},
		"username": {sim.DefaultUsername}, "password": {sim.DefaultPassword}})
	if err != nil {
		panic(err)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int    `json:"expires_in"`
	}
	_ = json.NewDecoder(res.Body).Decode(&tok)
	res.Body.Close()

	req, _ := http.NewRequest(http.MethodPost, srv.URL+sim.PathAccrual, strings.NewReader(
		`{"loyaltyId":"LB00000001","transactionId":"T-1","transactionDate":1763787600000,"transactionAmount":150000}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	var env struct {
		StatusCode int    `json:"statusCode"`
		Message    string `json:"message"`
	}
	_ = json.NewDecoder(res.Body).Decode(&env)
	res.Body.Close()
	http.DefaultClient.CloseIdleConnections()

	m, _ := s.Member("LB00000001")
	fmt.Println(tok.ExpiresIn, env.StatusCode, env.Message, m.Balance, s.Effects("T-1"))
	// Output: 300 200 SUCCESS 650 1
}
