package sim

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// AdminHeader carries the admin token on every /__sim/ call.
const AdminHeader = "X-Sim-Admin-Token"

// TokenTTLs is the body of /__sim/token-ttl (Go duration strings).
type tokenTTLs struct {
	AccessTokenTTL  string `json:"accessTokenTTL,omitempty"`
	RefreshTokenTTL string `json:"refreshTokenTTL,omitempty"`
}

// handleAdmin serves the admin API:
//
//	GET  /__sim/faults          the faults in force (Faults JSON)
//	PUT  /__sim/faults          replace them (400 with the problems if invalid)
//	POST /__sim/revoke-tokens   RevokeTokens
//	POST /__sim/credentials     RotateCredentials: {"clientSecret":…,"password":…,"revokeTokens":true}
//	GET  /__sim/token-ttl       {"accessTokenTTL":"5m0s","refreshTokenTTL":"30m0s"}
//	PUT  /__sim/token-ttl       change either or both
//	POST /__sim/late-applies/flush  FlushLateApplies
//	GET  /__sim/counters        Counters
//	GET  /__sim/ledger          {"<transactionId>": effects, …}
//	GET  /__sim/ledger?over=N   only the transactionIds applied more than N times (EffectsOver)
//	GET  /__sim/members/{id}    MemberState (balance, link state)
//	PUT  /__sim/transactions/{transactionId}          EditTransaction: {"kind":"ACCRUAL","points":N,"amount":X[,"loyaltyId":…]}
//	DELETE /__sim/transactions/{transactionId}?kind=K DeleteTransaction
//
// Without Options.AdminToken every path answers 404; a missing or wrong
// X-Sim-Admin-Token answers 401.
func (s *Server) handleAdmin(w http.ResponseWriter, r *http.Request) {
	if s.opts.AdminToken == "" {
		writeReply(w, plainError(http.StatusNotFound))
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.Header.Get(AdminHeader)), []byte(s.opts.AdminToken)) != 1 {
		writeReply(w, unauthorized("missing or wrong "+AdminHeader))
		return
	}
	writeReply(w, s.admin(w, r))
}

func adminOK(v any) reply { return reply{status: http.StatusOK, body: v} }

func adminBad(err error) reply {
	return badRequest(CodeInvalidRequest, err.Error())
}

func methodNotAllowed(allow ...string) reply {
	rep := plainError(http.StatusMethodNotAllowed)
	rep.header = map[string]string{"Allow": strings.Join(allow, ", ")}
	return rep
}

func (s *Server) admin(w http.ResponseWriter, r *http.Request) reply {
	path := strings.TrimPrefix(r.URL.Path, PathAdmin)
	readJSON := func(v any) error {
		b, err := readBody(&call{w: w, r: r})
		if err != nil {
			return err
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		return dec.Decode(v)
	}
	switch {
	case path == "faults":
		switch r.Method {
		case http.MethodGet:
			return adminOK(s.Faults())
		case http.MethodPut:
			var f Faults
			if err := readJSON(&f); err != nil {
				return adminBad(err)
			}
			if err := f.Validate(); err != nil {
				return adminBad(err)
			}
			s.SetFaults(f)
			return adminOK(s.Faults())
		}
		return methodNotAllowed(http.MethodGet, http.MethodPut)
	case path == "revoke-tokens":
		if r.Method != http.MethodPost {
			return methodNotAllowed(http.MethodPost)
		}
		s.RevokeTokens()
		return adminOK(map[string]bool{"revoked": true})
	case path == "credentials":
		if r.Method != http.MethodPost {
			return methodNotAllowed(http.MethodPost)
		}
		var c CredentialRotation
		if err := readJSON(&c); err != nil {
			return adminBad(err)
		}
		if c == (CredentialRotation{}) {
			return adminBad(errors.New("nothing to change: give clientSecret, password or revokeTokens"))
		}
		s.RotateCredentials(c)
		// The secrets are not echoed.
		return adminOK(map[string]bool{"clientSecretRotated": c.ClientSecret != "", "passwordRotated": c.Password != "",
			"tokensRevoked": c.RevokeTokens})
	case path == "token-ttl":
		switch r.Method {
		case http.MethodGet:
		case http.MethodPut:
			var t tokenTTLs
			if err := readJSON(&t); err != nil {
				return adminBad(err)
			}
			access, err1 := parseTTL(t.AccessTokenTTL)
			refresh, err2 := parseTTL(t.RefreshTokenTTL)
			if err := errors.Join(err1, err2); err != nil {
				return adminBad(err)
			}
			s.SetTokenTTLs(access, refresh)
		default:
			return methodNotAllowed(http.MethodGet, http.MethodPut)
		}
		a, rf := s.TokenTTLs()
		return adminOK(tokenTTLs{AccessTokenTTL: a.String(), RefreshTokenTTL: rf.String()})
	case path == "late-applies/flush":
		if r.Method != http.MethodPost {
			return methodNotAllowed(http.MethodPost)
		}
		s.FlushLateApplies()
		return adminOK(map[string]bool{"flushed": true})
	case path == "counters":
		if r.Method != http.MethodGet {
			return methodNotAllowed(http.MethodGet)
		}
		return adminOK(s.Counters())
	case path == "ledger":
		if r.Method != http.MethodGet {
			return methodNotAllowed(http.MethodGet)
		}
		if v := r.URL.Query().Get("over"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return adminBad(errors.New("over: want a whole number of effects, e.g. over=1"))
			}
			return adminOK(s.EffectsOver(n))
		}
		return adminOK(s.Ledger())
	case strings.HasPrefix(path, "transactions/") && len(path) > len("transactions/"):
		return s.adminTransaction(r, strings.TrimPrefix(path, "transactions/"), readJSON)
	case strings.HasPrefix(path, "members/"):
		if r.Method != http.MethodGet {
			return methodNotAllowed(http.MethodGet)
		}
		m, found := s.Member(strings.TrimPrefix(path, "members/"))
		if !found {
			return s.memberNotFound()
		}
		return adminOK(m)
	}
	return plainError(http.StatusNotFound)
}

// parseTTL reads an optional lifetime of at least one second.
func parseTTL(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Second {
		return 0, errors.New("token lifetimes are durations of at least 1s, e.g. \"90s\"")
	}
	return d, nil
}
